"""The JetStream API errors: the one module the rest of natsd imports them from.

Every entry of nats-server's ``server/errors.json`` (copied next to this module) is a typed
constant generated into ``errors_generated`` by ``tools/gen_jetstream_errors.py``, the way
nats-server generates ``jetstream_errors_generated.go``; each carries the three values clients
see on the wire::

    {"code": 404, "err_code": 10059, "description": "stream not found"}

``code`` is HTTP-like, ``err_code`` is the number clients branch on (nats.go, nats-py and the
nats CLI all switch on it) and ``description`` keeps nats-server's ``{placeholder}`` templates
(``"wrong last sequence: {seq}"``). The values were checked against the strings in the
nats-server 2.15.1 binary and its responses (``tests/jetstream/test_errors.py``).

Each constant is an :class:`ErrorDef`; calling it makes the :class:`ApiError` to raise::

    from natsd.jetstream.wire import errors as E

    raise E.JSStreamNotFoundErr()
    raise E.JSStreamWrongLastSequenceErrF(seq=41)
    raise E.JSStreamInvalidConfigF(err="max age needs to be >= 100ms")

Errors are named by constant, never by string, so a misspelt name is a mypy error. Like
nats-server's ``NewJS...Error(args)``, placeholders are replaced with ``str(value)``; a
placeholder without a value is left as it is. ``API_ERRORS`` (by name) and ``BY_ERR_CODE``
are the tables for code that is driven by data.
"""

from __future__ import annotations

from natsd.jetstream.wire.api_error import ApiError, ErrorDef, format_description
from natsd.jetstream.wire.errors_generated import *  # noqa: F403 (the constants, re-exported)
from natsd.jetstream.wire.errors_generated import __all__ as _generated

__all__ = ["ApiError", "ErrorDef", "format_description", *_generated]

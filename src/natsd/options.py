"""Old home of ``natsd.config.options``; re-exports it unchanged.

Kept only while ``natsd/jetstream/`` (reshaped in parallel under issue 15) still imports
``JS_ACCOUNT_LIMIT_KEYS`` from here. Once it imports ``natsd.config.options``, delete this
file and its entry in ``tests/unit/test_layers.py``.
"""

from natsd.config.options import (
    JS_ACCOUNT_LIMIT_KEYS,
    AccountConfig,
    JetStreamConfig,
    ServerOptions,
)

__all__ = ["JS_ACCOUNT_LIMIT_KEYS", "AccountConfig", "JetStreamConfig", "ServerOptions"]

"""The two types of the JetStream API error table: :class:`ErrorDef` (a row) and :class:`ApiError`.

A row of nats-server's ``server/errors.json`` is an :class:`ErrorDef`; calling it makes the
:class:`ApiError` to raise, as nats-server's ``NewJS...Error(args)`` does::

    raise JSStreamNotFoundErr()
    raise JSStreamWrongLastSequenceErrF(seq=41)

The rows themselves are generated into ``errors_generated`` (which imports this module);
``errors`` re-exports both, and is what the rest of natsd imports. These types live apart from
``errors`` so that the generated module sits below it: errors -> errors_generated -> api_error,
one way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ApiError", "ErrorDef", "format_description"]


def format_description(template: str, **args: Any) -> str:
    """Fill nats-server ``{name}`` placeholders with ``str(value)``; a placeholder without a
    value stays as it is (as nats-server's ``strings.Replacer`` leaves it)."""
    out = template
    for key, value in args.items():
        out = out.replace("{" + key + "}", str(value))
    return out


class ApiError(Exception):
    """A JetStream API error as sent in the ``error`` field of an API response."""

    __slots__ = ("code", "description", "err_code")

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "err_code": self.err_code, "description": self.description}

    def is_(self, definition: ErrorDef) -> bool:
        """True when this error is an instance of ``definition`` (same ``err_code``)."""
        return self.err_code == definition.err_code

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApiError):
            return NotImplemented
        return (self.code, self.err_code, self.description) == (
            other.code,
            other.err_code,
            other.description,
        )

    def __hash__(self) -> int:
        return hash((self.code, self.err_code, self.description))

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.err_code}, {self.description!r})"


@dataclass(frozen=True, slots=True)
class ErrorDef:
    """One row of errors.json: call it to get an :class:`ApiError`.

    ``constant`` is nats-server's name, ``code`` the HTTP-like status, ``err_code`` the number
    clients branch on (nats.go, nats-py and the nats CLI switch on it), ``description`` the
    text with its ``{placeholder}`` templates, ``deprecates`` the older Go error it replaces.
    """

    constant: str
    code: int
    err_code: int
    description: str
    deprecates: str = ""

    def __call__(self, **args: Any) -> ApiError:
        return ApiError(self.code, self.err_code, format_description(self.description, **args))

    def matches(self, error: BaseException) -> bool:
        return isinstance(error, ApiError) and error.err_code == self.err_code

"""Resource URIs of an ``McpResourceProvider``: a fixed URI, or a template filled per run.

A template names run-context fields in braces: ``users://{user_id}/profile``. Only
simple expressions (``{name}``) are taken: RFC 6570's operators (``{+path}``,
``{?q}``, ``{#f}``...) keep reserved characters such as ``/`` and ``?`` as they are,
so a user's value could reach another resource through them; a template that uses
one is refused when the provider is built.

Filling is strict, and pure:

* every value is percent-encoded whole (everything but ``A-Z a-z 0-9 - . _ ~``), so
  ``../admin`` becomes ``..%2Fadmin`` and ``?x=1`` becomes ``%3Fx%3D1``: one value
  fills one place, never a path segment or a query of its own;
* a value that would be a dot segment on its own (``.``, ``..``) is refused;
* a missing value (unset, ``None`` or empty) is a
  :class:`~lionctx.SourceUnavailable` naming the field (never its value), never a
  request with an empty value; so is a value that is not a ``str`` or an ``int``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .._exceptions import InvalidType, InvalidValue
from .._outcome import SourceUnavailable

__all__ = ["UriTemplate", "fill_problem"]

_CAMEL_TO_SNAKE = {"userId": "user_id", "tenantId": "tenant_id", "sessionId": "session_id",
                   "runId": "run_id"}
_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Longest URI accepted (built or given): a resource URI is an address, not a payload.
MAX_URI_CHARS = 4096


@dataclass(frozen=True)
class UriTemplate:
    """A resource URI, possibly with ``{field}`` places filled from the run context."""

    text: str
    #: ``(literal, field, literal, field, ..., literal)``: literals at even positions.
    parts: tuple[str, ...]
    #: The snake_case run-context fields, in order of first appearance.
    fields: tuple[str, ...]

    @classmethod
    def parse(cls, uri: Any) -> UriTemplate:
        """``uri`` checked: a non-empty ``str`` whose ``{...}`` are simple field names."""
        if not isinstance(uri, str):
            raise InvalidType(f"uri must be a str, got {type(uri).__name__}")
        if not uri or len(uri) > MAX_URI_CHARS or not uri.isprintable() or " " in uri:
            raise InvalidValue(f"uri must be a resource URI (printable, no spaces, at most "
                               f"{MAX_URI_CHARS} characters), got {uri[:80]!r}")
        parts: list[str] = []
        fields: list[str] = []
        at = 0
        for match in _EXPRESSION.finditer(uri):
            name = match.group(1)
            if not _FIELD.fullmatch(name):
                raise InvalidValue(f"uri template {uri!r}: {{{name}}} is not a simple field name "
                                   f"(operators such as {{+x}} or {{?x}} are not accepted: they "
                                   f"would let a value carry '/' or '?')")
            parts.append(uri[at:match.start()])
            snake = _CAMEL_TO_SNAKE.get(name, name)
            parts.append(snake)
            if snake not in fields:
                fields.append(snake)
            at = match.end()
        parts.append(uri[at:])
        if any("{" in p or "}" in p for p in parts[::2]):
            raise InvalidValue(f"uri template {uri!r} has an unmatched brace")
        if ":" not in parts[0]:
            raise InvalidValue(f"uri must start with a scheme (such as 'notes://'), got "
                               f"{uri[:80]!r}")
        return cls(uri, tuple(parts), tuple(fields))

    def fill(self, read: Callable[[str], Any]) -> str:
        """The URI with each field's value from ``read(field)``, percent-encoded.

        Raises :class:`~lionctx.SourceUnavailable` naming the field (never its value)
        when a value is missing or refused: no request is made for this run.
        """
        if not self.fields:
            return self.text
        out: list[str] = []
        for i, part in enumerate(self.parts):
            if i % 2 == 0:
                out.append(part)
                continue
            value = read(part)
            problem = fill_problem(value)
            if problem is not None:
                raise SourceUnavailable(f"run context field {part!r} {problem}")
            out.append(quote(str(value), safe=""))
        uri = "".join(out)
        if len(uri) > MAX_URI_CHARS:
            raise SourceUnavailable(f"the URI filled from the run context is over {MAX_URI_CHARS} "
                               f"characters")
        return uri


def fill_problem(value: Any) -> str | None:
    """Why ``value`` cannot fill a template field, or ``None`` when it can."""
    if value is None or value == "":
        return "is not set"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"is a {type(value).__name__}, not a str or int"
    if str(value) in (".", ".."):
        return "is a dot segment ('.' or '..')"
    return None

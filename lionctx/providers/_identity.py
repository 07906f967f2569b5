"""``source_identity`` and default names: an identity is ``KIND:`` and a JSON array of the
parts that decide the text (secrets as a salted digest, a function by its code's digest).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import types
import weakref
from collections.abc import Iterable
from typing import Any

from .._exceptions import InvalidType, InvalidValue

__all__ = ["MAX_IDENTITY", "callable_identity", "check_fields", "check_identity", "hashable",
           "identity_of", "name_from_path", "secret_digest"]

#: Longest identity a caller may state (an identity names a source, it is not data).
MAX_IDENTITY = 1024
_FIELD = re.compile(r"[a-z][a-z0-9_]{0,63}")


def identity_of(kind: str, *parts: Any) -> str:
    """``KIND:[part, ...]``, the parts as JSON (str, int, bool, None, lists of them)."""
    return f"{kind}:" + json.dumps(list(parts), ensure_ascii=True, separators=(",", ":"))


def secret_digest(*parts: Any) -> str:
    """32 hex characters standing for ``parts`` (secrets), salted for this use only."""
    material = repr(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(material, digest_size=16, key=b"lionctx-source-identity",
                           person=b"lionctx-secret").hexdigest()


def hashable(value: Any) -> bool:
    """Whether ``hash(value)`` works (a tuple holding a list does not)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _shown(value: Any) -> str | None:
    """``repr(value)``, or None when it holds an address or cannot be taken."""
    try:
        text = repr(value)
    except Exception:
        return None
    return None if " at 0x" in text else text


def callable_identity(fn: Any) -> str | None:
    """A name for what ``fn`` computes, the same in every process running the same code;
    ``None`` when it carries state only this process can name (read when first named)."""
    if fn is None:
        return "none"
    with contextlib.suppress(KeyError, TypeError):  # not seen, or not weak-referenceable
        return _NAMED[fn]
    if (shown := _shown(_material(fn, 0))) is None:
        return None
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)
    if not hasattr(target, "__code__") and not isinstance(target, type):
        target = type(target)
    module = getattr(target, "__module__", None) or "?"
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", "?")
    named = f"{module}.{name}#{secret_digest(shown)[:16]}"
    with contextlib.suppress(TypeError):
        _NAMED[fn] = named
    return named


#: Functions already named, while they live (bounded by the live functions).
_NAMED: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_DEPTH = 4


def _material(value: Any, depth: int) -> Any:
    """What decides what a callable computes, with code and functions spelled out."""
    if depth > _DEPTH:
        return value  # its repr decides (an address there means: no identity)
    if isinstance(value, types.CodeType):
        return ("code", value.co_code, [_material(c, depth + 1) for c in value.co_consts],
                value.co_names)
    if isinstance(value, functools.partial):
        return ("partial", _material(value.func, depth + 1),
                [_material(a, depth + 1) for a in value.args],
                sorted((k, _material(v, depth + 1)) for k, v in value.keywords.items()))
    if isinstance(value, types.MethodType):
        return ("method", _material(value.__func__, depth + 1),
                _material(value.__self__, depth + 1))
    if isinstance(value, types.FunctionType):
        cells = [_material(c.cell_contents, depth + 1)
                 for c in (value.__closure__ or ()) if _has_contents(c)]
        return ("function", value.__module__, value.__qualname__,
                _material(value.__code__, depth + 1),
                [_material(d, depth + 1) for d in (value.__defaults__ or ())],
                sorted((k, _material(v, depth + 1))
                       for k, v in (value.__kwdefaults__ or {}).items()), cells)
    if isinstance(value, type):
        return ("class", value.__module__, value.__qualname__)
    return value


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def check_identity(value: Any, label: str = "source_identity") -> str | None:
    """``None`` or 1-:data:`MAX_IDENTITY` printable characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidType(f"{label} must be a str or None, got {value!r}")
    if not value or len(value) > MAX_IDENTITY or not value.isprintable():
        raise InvalidValue(f"{label} must be 1-{MAX_IDENTITY} printable characters, "
                           f"got {value[:80]!r}")
    return value


def check_fields(value: Any, label: str = "context_fields") -> tuple[str, ...]:
    """A tuple of snake_case run-context field names (``("tenant_id", "user_id")``)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidType(f"{label} must be a tuple of field names such as "
                          f"('user_id',), got {value!r}")
    fields = tuple(value)
    for field in fields:
        if not isinstance(field, str) or not _FIELD.fullmatch(field):
            raise InvalidValue(f"{label}: {field!r} is not a snake_case run-context "
                               f"field name such as 'user_id'")
    return fields


# Anything but letters, digits, "_", "." and "-" becomes one "-": a name lands in
# ``<context name="...">``, log lines and report tables.
_UNSAFE = re.compile(r"[^\w.-]+")
_MAX_LEN = 64


def name_from_path(path: str | os.PathLike[str], *, fallback: str,
                   strip_suffix: bool = False) -> str:
    """``path``'s last component (``strip_suffix``: without its extension), never credentials
    or a query, other characters than letters, digits and ``_.-`` as ``-``; else ``fallback``.
    """
    text = os.fspath(path).split("?", 1)[0].split("#", 1)[0]
    last = re.split(r"[/\\]", text.rstrip("/\\"))[-1]
    last = last.rsplit("@", 1)[-1]  # "user:password@host": never the secret
    if strip_suffix and "." in last.strip("."):
        last = last.rsplit(".", 1)[0]
    # \w excludes lone surrogates (undecodable bytes), so the name encodes as UTF-8.
    return _UNSAFE.sub("-", last).strip("-.")[:_MAX_LEN].strip("-.") or fallback

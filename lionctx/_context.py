"""The run context every provider receives, and binding one to a turn (a ``ContextVar``:
it follows ``await``, tasks and worker threads, never into a concurrent turn). A mapping
or object given as a run context may spell a field in camelCase (``userId``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from ._exceptions import InvalidType, InvalidValue

__all__ = ["RunContext", "bind_run_context", "bound_run_context", "coerce_run_context",
           "context_value"]

C = TypeVar("C", bound="RunContext")


def camel(name: str) -> str:
    """The camelCase spelling of a snake_case field name (``user_id``: ``userId``)."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def spellings(*names: str) -> dict[str, str]:
    """``{spelling: field}`` for each of ``names`` in snake_case and camelCase."""
    return {spelling: name for name in names for spelling in (name, camel(name))}


@dataclass
class RunContext:
    """Who and what a run is for. Passed to every provider's ``fetch(query, ctx)``.

    Fields read as attributes and by key (``ctx.user_id``, ``ctx["user_id"]``); keys a
    caller gave that are no field are kept in ``extra`` and read the same way.
    """

    user_id: Any = None
    tenant_id: Any = None
    session_id: Any = None
    # 128 random bits, not a uuid4 object (4x the cost: the realistic resolve_context row)
    run_id: str = field(default_factory=lambda: os.urandom(16).hex())
    metadata: dict[str, Any] = field(default_factory=dict)
    session_state: dict[str, Any] = field(default_factory=dict)
    dependencies: dict[str, Any] = field(default_factory=dict)
    signal: Any = None
    #: Keys a caller passed that RunContext has no field for; readable as attributes.
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Dependencies, state and extras can hold clients and secrets: show keys only.
        return (f"RunContext(user_id={self.user_id!r}, tenant_id={self.tenant_id!r}, "
                f"session_id={self.session_id!r}, run_id={self.run_id!r}, "
                f"metadata={sorted(self.metadata)!r}, "
                f"session_state={sorted(self.session_state)!r}, "
                f"dependencies={sorted(self.dependencies)!r}, extra={sorted(self.extra)!r})")

    def get_state(self, key: str, default: Any = None) -> Any:
        """Read ``session_state[key]``."""
        return self.session_state.get(key, default)

    def set_state(self, key: str, value: Any) -> None:
        """Write ``session_state[key]``."""
        self.session_state[key] = value

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields or properties.
        extra = self.__dict__.get("extra")
        if extra is not None and name in extra:
            return extra[name]
        raise AttributeError(f"RunContext has no attribute {name!r}")

    def __getitem__(self, key: str) -> Any:
        if key in _FIELD_NAMES:
            return getattr(self, key)
        if key in self.extra:
            return self.extra[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in _FIELD_NAMES or key in self.extra)

    def get(self, key: str, default: Any = None) -> Any:
        """Mapping-style read: the field or extra key ``key``, else ``default``."""
        try:
            return self[key]
        except KeyError:
            return default

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (``signal`` left out, ``extra`` merged in)."""
        out = {name: getattr(self, name) for name in _FIELD_NAMES if name != "signal"}
        out.update(self.extra)
        return out

    @classmethod
    def coerce(cls: type[C], ctx: Any = None, /, **overrides: Any) -> C:
        """A run context of this class from ``None`` (the bound one, if any), a
        RunContext (as is, or copied with its dicts shared), a mapping or an object;
        their unknown keys land in ``extra``, an unknown override is refused."""
        if ctx is None and not overrides:
            ctx = _BOUND.get()
            if ctx is None:
                return cls()
        if isinstance(ctx, cls) and not overrides:
            return ctx
        values: dict[str, Any] = {}
        if isinstance(ctx, RunContext):
            values = {n: getattr(ctx, n) for n in _FIELD_NAMES}
            values["extra"] = dict(ctx.extra)
        else:
            values["extra"] = extra = dict[str, Any]()
            for key, value in _items(ctx).items():
                if not isinstance(key, str):
                    raise InvalidType(f"run context keys must be str, got {key!r}")
                name = _SPELLED.get(key)
                if name is None:
                    extra[key] = value
                elif (type(was := values.get(name, value)), was) != (type(value), value):
                    raise InvalidValue(f"run context gives {name} two values (one as {key!r})")
                else:
                    values[name] = value
        for key, value in overrides.items():
            name = _SPELLED.get(key)
            if name is None:
                raise InvalidType(f"unknown run context field {key!r}")
            values[name] = value
        for name in ("metadata", "session_state", "dependencies", "run_id"):
            if values.get(name) is None:
                values.pop(name, None)
        return cls(**values)


_FIELD_NAMES = tuple(f.name for f in fields(RunContext) if f.name != "extra")
_SPELLED = spellings(*_FIELD_NAMES)
_MISSING = object()


def _items(ctx: Any) -> dict[Any, Any]:
    """A mapping's items, or an object's public attributes and fields in either spelling."""
    if ctx is None:
        return {}
    if isinstance(ctx, Mapping):
        return dict(ctx)
    items = {k: v for k, v in getattr(ctx, "__dict__", {}).items() if not k.startswith("_")}
    for name in _FIELD_NAMES:
        for spelling in (name, camel(name)):
            if spelling not in items:
                value = getattr(ctx, spelling, _MISSING)
                if value is not _MISSING:
                    items[spelling] = value
                    break
    return items


coerce_run_context = RunContext.coerce  # a RunContext from any run-context shape


def context_value(ctx: Any, key: str, default: Any = None) -> Any:
    """Read ``key`` (snake_case, else camelCase; key or attribute) from a RunContext, a
    mapping or any object; where it is unset, from the bound run context."""
    value = _read(ctx, key, None)
    if value is None:
        bound = _BOUND.get()
        if bound is not None and bound is not ctx:
            value = bound.get(key, None)
    return default if value is None else value


def _read(ctx: Any, key: str, default: Any) -> Any:
    if ctx is None:
        return default
    if isinstance(ctx, RunContext):
        return ctx.get(key, default)
    if isinstance(ctx, Mapping):
        return ctx[key] if key in ctx else ctx.get(camel(key), default)
    value = getattr(ctx, key, _MISSING)
    return getattr(ctx, camel(key), default) if value is _MISSING else value


_BOUND: ContextVar[RunContext | None] = ContextVar("lionctx_run_context", default=None)


def bound_run_context() -> RunContext | None:
    """The run context bound by the innermost :func:`bind_run_context`, or ``None``."""
    return _BOUND.get()


@contextlib.contextmanager
def bind_run_context(ctx: Any = None, /, **fields: Any) -> Iterator[RunContext]:
    """Bind a run context for the turn inside the ``with`` block; yields it::

        with lionctx.bind_run_context(user_id="u1", tenant_id="acme"):
            await branch.chat("...")     # providers see user u1 of tenant acme

    ``ctx`` is a RunContext, a mapping or an object shaped like one; ``fields``
    override it (an unknown one raises ``TypeError`` naming it). Providers read a
    field from here when their own ``ctx`` leaves it unset; anything given no run
    context adopts the bound one. Bindings nest and follow ``await``, tasks and
    lionctx's worker threads; concurrent turns each see their own.
    """
    run_ctx = coerce_run_context(ctx, **fields)
    token = _BOUND.set(run_ctx)
    try:
        yield run_ctx
    finally:
        _BOUND.reset(token)

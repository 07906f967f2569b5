"""The run context every provider receives.

``RunContext`` mirrors agentium's: run and session ids, the user and tenant, free
metadata, per-session state, a cancel signal, dependencies, and ``get_state`` /
``set_state``. Every field answers to its snake_case and its camelCase name, as an
attribute and by key, so providers written against either API read it unchanged.

A host that has no place for a run context (a real LionAGI ``Branch``, an OpenAI
Agents SDK run...) binds one for the duration of a turn with
:func:`bind_run_context`. It lives in a :class:`contextvars.ContextVar`, so it
follows ``await``, is inherited by tasks started inside the block (task groups) and
by lionctx's worker threads (anyio copies the context into them), and never leaks
into a concurrent turn. Built-in providers read it where the branch or the ``ctx``
they were given leaves a field unset (see :func:`context_value`).
"""

from __future__ import annotations

import contextlib
import inspect
import uuid
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any

from ._exceptions import InvalidType

__all__ = ["RunContext", "bind_run_context", "bound_run_context", "coerce_run_context",
           "context_value"]

# camelCase spelling -> field name
_CAMEL = {
    "runId": "run_id",
    "sessionId": "session_id",
    "userId": "user_id",
    "tenantId": "tenant_id",
    "sessionState": "session_state",
}
_SNAKE_TO_CAMEL = {v: k for k, v in _CAMEL.items()}


def spellings(*fields: str) -> dict[str, str]:
    """``{spelling: field}`` for each of ``fields`` (RunContext field names), in both
    its snake_case and (where it has one) its camelCase spelling: the one table of run
    keys that ``Agent.run`` options and the SQLite provider's parameters read."""
    out: dict[str, str] = {}
    for name in fields:
        out[name] = name
        camel = _SNAKE_TO_CAMEL.get(name)
        if camel is not None:
            out[camel] = name
    return out


def _new_run_id() -> str:
    return uuid.uuid4().hex


@dataclass
class RunContext:
    """Who and what a run is for. Passed to every provider's ``fetch(query, ctx)``.

    The constructor takes either spelling: ``RunContext(user_id="u1")`` or
    ``RunContext(userId="u1")`` (also ``runId``, ``sessionId``, ``tenantId``,
    ``sessionState``).
    """

    user_id: Any = None
    tenant_id: Any = None
    session_id: Any = None
    run_id: str = field(default_factory=_new_run_id)
    metadata: dict[str, Any] = field(default_factory=dict)
    session_state: dict[str, Any] = field(default_factory=dict)
    dependencies: dict[str, Any] = field(default_factory=dict)
    signal: Any = None
    #: Keys a caller passed that RunContext has no field for; readable as attributes.
    extra: dict[str, Any] = field(default_factory=dict)

    # camelCase views, so ctx.userId works as it does in agentium
    @property
    def runId(self) -> str:  # noqa: N802
        return self.run_id

    @property
    def sessionId(self) -> Any:  # noqa: N802
        return self.session_id

    @property
    def userId(self) -> Any:  # noqa: N802
        return self.user_id

    @property
    def tenantId(self) -> Any:  # noqa: N802
        return self.tenant_id

    @property
    def sessionState(self) -> dict[str, Any]:  # noqa: N802
        return self.session_state

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

    getState = get_state  # noqa: N815
    setState = set_state  # noqa: N815

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields or properties.
        extra = self.__dict__.get("extra")
        if extra is not None and name in extra:
            return extra[name]
        raise AttributeError(f"RunContext has no attribute {name!r}")

    def __getitem__(self, key: str) -> Any:
        key = _CAMEL.get(key, key)
        if key in _FIELD_NAMES:
            return getattr(self, key)
        if key in self.extra:
            return self.extra[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        key = _CAMEL.get(key, key)
        return key in _FIELD_NAMES or key in self.extra

    def get(self, key: str, default: Any = None) -> Any:
        """Mapping-style read that accepts either spelling."""
        try:
            return self[key]
        except KeyError:
            return default

    def to_dict(self, *, camel: bool = False) -> dict[str, Any]:
        """The fields as a plain dict (``signal`` left out)."""
        out: dict[str, Any] = {}
        for name in _FIELD_NAMES:
            if name in ("signal", "extra"):
                continue
            out[_SNAKE_TO_CAMEL.get(name, name) if camel else name] = getattr(self, name)
        out.update(self.extra)
        return out


_FIELD_NAMES = tuple(f.name for f in fields(RunContext))
_dataclass_init = RunContext.__init__


def _init_any_spelling(self: RunContext, *args: Any, **kwargs: Any) -> None:
    # agentium users write RunContext(userId="u1"): take the camelCase spellings too.
    for camel, snake in _CAMEL.items():
        if camel in kwargs:
            if snake in kwargs:
                raise InvalidType(f"RunContext got both {camel!r} and {snake!r}")
            kwargs[snake] = kwargs.pop(camel)
    _dataclass_init(self, *args, **kwargs)


_init_any_spelling.__doc__ = _dataclass_init.__doc__
_init_any_spelling.__signature__ = inspect.signature(_dataclass_init)  # type: ignore[attr-defined]
RunContext.__init__ = _init_any_spelling  # type: ignore[method-assign]


def context_value(ctx: Any, key: str, default: Any = None) -> Any:
    """Read ``key`` (snake_case) from a RunContext, a mapping or any object.

    Tries the snake_case and the camelCase spelling, as key or attribute. When
    ``ctx`` is ``None``, or has the key unset (missing or ``None``), the value comes
    from the run context bound by :func:`bind_run_context`, if any.
    """
    value = _read(ctx, key, None)
    if value is None:
        bound = _BOUND.get()
        if bound is not None and bound is not ctx:
            value = bound.get(key, None)
    return default if value is None else value


def _read(ctx: Any, key: str, default: Any) -> Any:
    if ctx is None:
        return default
    camel = _SNAKE_TO_CAMEL.get(key, key)
    if isinstance(ctx, RunContext):
        return ctx.get(key, default)
    if isinstance(ctx, Mapping):
        if key in ctx:
            return ctx[key]
        return ctx.get(camel, default)
    value = getattr(ctx, key, _MISSING)
    if value is _MISSING:
        value = getattr(ctx, camel, default)
    return value


_MISSING = object()


_BOUND: ContextVar[RunContext | None] = ContextVar("lionctx_run_context", default=None)


def bound_run_context() -> RunContext | None:
    """The run context bound by the innermost :func:`bind_run_context`, or ``None``."""
    return _BOUND.get()


@contextlib.contextmanager
def bind_run_context(ctx: Any = None, /, **fields: Any) -> Iterator[RunContext]:
    """Bind a run context for the turn inside the ``with`` block; yields it.

    ::

        with lionctx.bind_run_context(user_id="u1", tenant_id="acme"):
            await branch.chat("...")     # providers see user u1 of tenant acme

    ``ctx`` is a RunContext, a mapping or an object shaped like one; ``fields``
    (snake_case or camelCase) override it. An unknown field raises ``TypeError``
    naming it, before anything is bound. Built-in providers read a field from here
    when the branch or the ``ctx`` they were called with leaves it unset; a
    provider called with no ``ctx`` at all gets this whole context. Bindings nest
    (the inner one wins inside its block) and follow ``await``, tasks started
    inside the block and lionctx's worker threads; concurrent turns each see their
    own. Anything that takes a run context and is given none while a binding is
    active adopts the bound one (a ``lionctx.Branch`` built inside the block keeps
    it as its own).
    """
    run_ctx = coerce_run_context(ctx, **fields)
    token = _BOUND.set(run_ctx)
    try:
        yield run_ctx
    finally:
        _BOUND.reset(token)


def coerce_run_context(ctx: Any = None, **overrides: Any) -> RunContext:
    """Build a :class:`RunContext` from ``None``, a RunContext, a mapping or an object.

    A RunContext is returned as is when there is nothing to override. Unknown keys of
    a mapping (or public attributes of an object) land in ``extra``. ``None`` with
    no overrides gives the context bound by :func:`bind_run_context` when there is
    one, else a new empty context.
    """
    if ctx is None and not overrides:
        bound = _BOUND.get()
        if bound is not None:
            return bound
    if isinstance(ctx, RunContext) and not overrides:
        return ctx
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    if isinstance(ctx, RunContext):
        values = {n: getattr(ctx, n) for n in _FIELD_NAMES if n != "extra"}
        extra = dict(ctx.extra)
    elif isinstance(ctx, Mapping):
        items = dict(ctx)
    elif ctx is not None:
        # Any object: its public attributes (when it has a __dict__), then every known
        # field in either spelling, which also reaches slots and properties.
        items = {k: v for k, v in getattr(ctx, "__dict__", {}).items() if not k.startswith("_")}
        for name in _FIELD_NAMES:
            if name in ("extra",):
                continue
            for spelling in (name, _SNAKE_TO_CAMEL.get(name, name)):
                if spelling not in items:
                    value = getattr(ctx, spelling, _MISSING)
                    if value is not _MISSING:
                        items[spelling] = value
                        break
    else:
        items = {}
    if not isinstance(ctx, RunContext):
        for key, value in items.items():
            if not isinstance(key, str):
                raise InvalidType(f"run context keys must be str, got {key!r}")
            name = _CAMEL.get(key, key)
            if name in _FIELD_NAMES and name != "extra":
                values[name] = value
            else:
                extra[key] = value
    for key, value in overrides.items():
        name = _CAMEL.get(key, key)
        if name not in _FIELD_NAMES or name == "extra":
            raise InvalidType(f"unknown run context field {key!r}")
        values[name] = value
    for name in ("metadata", "session_state", "dependencies"):
        if values.get(name) is None:
            values.pop(name, None)
    if values.get("run_id") is None:
        values.pop("run_id", None)
    return RunContext(**values, extra=extra)

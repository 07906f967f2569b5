"""agentium's ``RunContext`` (lionctx's, also spelled as agentium spells it), the
``ContextProvider`` protocol, and the resolve entry points that hand it to providers."""

from __future__ import annotations

import operator
import re
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, runtime_checkable

import lionctx
from lionctx import InvalidType
from lionctx._face import camel, spellings  # extension: the core's spellings

__all__ = ["CAMEL", "ContextProvider", "RunContext", "camel", "resolveContextProviders",
           "resolve_context", "resolve_context_providers", "snake", "spellings"]

#: agentium's spelling -> the lionctx field.
CAMEL = {camel(name): name for name in ("run_id", "session_id", "user_id", "tenant_id",
                                        "session_state")}
_UPPER = re.compile(r"(?<!^)(?=[A-Z])")


def snake(name: str) -> str:
    """The snake_case spelling of a camelCase name (``userId``: ``user_id``)."""
    return _UPPER.sub("_", name).lower()


class RunContext(lionctx.RunContext):
    """agentium's ``RunContext``: :class:`lionctx.RunContext` read in both spellings.

    ``RunContext(userId="u1")`` or ``RunContext(user_id="u1")``; ``ctx.userId``,
    ``ctx["userId"]``, ``ctx.sessionState``, ``ctx.getState(key)`` and
    ``ctx.setState(key, value)`` as in agentium, beside the snake_case names. The
    providers an agentium entry point runs (``resolveContextProviders``,
    ``Agent.run``, this package's providers' ``fetch``) receive one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for spelling, name in CAMEL.items():
            if spelling in kwargs:
                if name in kwargs:
                    raise InvalidType(f"RunContext got both {spelling!r} and {name!r}")
                kwargs[name] = kwargs.pop(spelling)
        super().__init__(*args, **kwargs)

    getState = lionctx.RunContext.get_state  # noqa: N815
    setState = lionctx.RunContext.set_state  # noqa: N815

    def __getitem__(self, key: str) -> Any:
        return super().__getitem__(CAMEL.get(key, key))

    def __contains__(self, key: object) -> bool:
        return super().__contains__(CAMEL.get(key, key) if isinstance(key, str) else key)


for _spelling, _field in CAMEL.items():  # ctx.userId and friends, read-only
    setattr(RunContext, _spelling, property(operator.attrgetter(_field),
                                            doc=f"Same as ``{_field}``."))


@runtime_checkable
class ContextProvider(Protocol):
    """What agentium's ``ContextProvider`` interface asks for.

    ``name`` names the provider's ``<context name="...">`` block; ``fetch(query, ctx)``
    returns the text for this turn, or ``None`` when there is none (async, or a plain
    return value). ``isinstance(obj, ContextProvider)`` checks that both are present.
    """

    name: str

    def fetch(self, query: str, ctx: Any) -> Awaitable[str | None] | str | None:
        """The context text for ``query`` in the run context ``ctx``, or ``None``."""
        ...


async def resolve_context(providers: Sequence[Any], query: str, ctx: Any = None,
                          **options: Any) -> lionctx.Resolution:
    """:func:`lionctx.resolve_context`, its providers given agentium's :class:`RunContext`.

    ``ctx`` is a RunContext, or any mapping or object shaped like one
    (``{"userId": "u1"}``); the options are :func:`lionctx.resolve_context`'s.
    """
    return await lionctx.resolve_context(providers, query, RunContext.coerce(ctx), **options)


async def resolve_context_providers(providers: Sequence[Any], query: str, ctx: Any = None,
                                    **options: Any) -> str:
    """agentium's ``resolveContextProviders``: every provider's text in ``<context>``
    tags, in list order, joined by a blank line (``""`` when none returned any).

    ``ctx`` is a RunContext, or any mapping or object shaped like one; the options are
    :func:`lionctx.resolve_context`'s.
    """
    return (await resolve_context(providers, query, ctx, **options)).text


resolveContextProviders = resolve_context_providers

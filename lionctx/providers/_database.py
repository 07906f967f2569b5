"""``DatabaseContextProvider``: any function of the run context (``fetch(ctx)`` or
``fetch(query, ctx)``), as a provider."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .._adapters import _is_async
from .._exceptions import InvalidType, InvalidValue
from .._threads import run_in_worker
from ._base import ContextSource, SourceUnavailable, check_name
from ._identity import check_fields, check_identity, hashable

if TYPE_CHECKING:  # pragma: no cover
    from ._sqlite import SqliteContextProvider

__all__ = ["DatabaseContextProvider"]


def _wants_query(fn: Any) -> bool:
    """True when ``fn`` takes two positional arguments, ``(query, ctx)``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False  # a builtin we cannot inspect: assume the page's fetch(ctx)
    params = sig.parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    # Required parameters decide: fetch(ctx, limit=5) is the page's form.
    if required := sum(p.default is p.empty for p in positional):
        return required >= 2
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


class DatabaseContextProvider(ContextSource):
    """Adapt ``fetch`` to a context provider named ``name`` (or ``label``).

    Args:
        name: The provider's name in reports and ``<context name="...">``.
        fetch: ``fetch(ctx)`` or ``fetch(query, ctx)`` returning ``str | None``; a sync
            function runs in a worker thread.
        label: The published agentium spelling of ``name``.
        takes_query: Force the calling convention when the signature is ambiguous
            (``True``: ``fetch(query, ctx)``; ``False``: ``fetch(ctx)``).
        source_identity: A stable name without secrets for what ``fetch`` reads
            (``"crm:accounts"``); without it no answer is shared across processes.
        context_fields: The run-context fields ``fetch``'s answer depends on
            (``("tenant_id", "user_id")``); state every one it reads.
    """

    def __init__(self, name: str | None = None, fetch: Callable[..., Any] | None = None, *,
                 label: str | None = None, takes_query: bool | None = None,
                 source_identity: str | None = None, context_fields: Iterable[str] = ()) -> None:
        if name is not None and label is not None and name != label:
            raise InvalidValue(f"give name or label, not both (got name={name!r}, label={label!r})")
        self.name = check_name(name if name is not None else label, "name (or label)")
        if fetch is None or not callable(fetch):
            raise InvalidType(f"fetch must be a function of (ctx) or (query, ctx), got {fetch!r}")
        if takes_query is not None and not isinstance(takes_query, bool):
            raise InvalidType(f"takes_query must be a bool or None, got {takes_query!r}")
        self.source_identity = check_identity(source_identity)
        self.context_fields = check_fields(context_fields)
        self._fn = fetch
        self._async = _is_async(fetch)
        self.takes_query = _wants_query(fetch) if takes_query is None else takes_query
        # Stuck threads are capped per function (providers built per request share it).
        self._worker_key: Any = ("database", fetch) if hashable(fetch) else ("database", self)

    @property
    def label(self) -> str:
        """The published agentium spelling of ``name``."""
        return self.name

    def __repr__(self) -> str:
        return f"DatabaseContextProvider(name={self.name!r}, fetch={self._fn!r})"

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        """Call the wrapped function with ``ctx`` (and ``query`` if it takes it)."""
        args = (query, ctx) if self.takes_query else (ctx,)
        try:
            if self._async:
                result = await self._fn(*args)
            else:
                # Abandoned on a timeout: the late result dies with that thread.
                result = await run_in_worker(functools.partial(self._fn, *args),
                                             key=self._worker_key)
                if inspect.isawaitable(result):  # a plain function that returned a coroutine
                    result = await result
        except Exception as exc:
            # The function's own error, unchanged; remembered for those who look.
            self.last_error = (str(exc) if isinstance(exc, SourceUnavailable)
                               else f"{type(exc).__name__}: {exc}")
            raise
        self.last_error = None
        return result  # type: ignore[no-any-return]

    @staticmethod
    def sqlite(database: Any, sql: str, **options: Any) -> SqliteContextProvider:
        """An embedded SQLite provider; see :class:`SqliteContextProvider`."""
        from ._sqlite import SqliteContextProvider

        return SqliteContextProvider(database, sql, **options)

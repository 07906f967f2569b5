"""The one host adapter every integration declares itself over (:class:`HostHook`):
checked options, the run context, one resolve per run, the run's report tied weakly to
the run's own objects, the baseline kept per session, user and tenant."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import anyio

from .._adapters import fetch_method, retrieve_method
from .._context import RunContext, _read, bind_run_context, bound_run_context, coerce_run_context
from .._exceptions import InvalidType
from .._log import logger_for
from .._report import Report
from .._scope import scope_text
from .._stability import PrefixHistory
from .._weakid import WeakIdMap
from ..resolve import DEFAULT_TIMEOUT, Resolution, resolve_pass, resolve_with

__all__ = ["DEFAULT_TIMEOUT", "HostHook", "merge_run_context", "text_of"]

logger = logger_for(__name__)

#: The keyword options of :func:`lionctx.resolve_context` an integration accepts.
RESOLVE_OPTIONS = ("timeout", "deadline", "budget", "limit", "counter", "on_outcome",
                   "breaker", "dedupe")


def _check_providers(providers: Any, where: str) -> list[Any]:
    if isinstance(providers, (str, bytes)) or not isinstance(providers, Sequence):
        raise InvalidType(f"{where}: providers must be a list of context providers, "
                        f"got {providers!r}")
    for i, provider in enumerate(providers):
        if (retrieve_method(provider) is None and fetch_method(provider) is None
                and not callable(getattr(provider, "provide", None))):
            raise InvalidType(f"{where}: providers[{i}] ({provider!r}) has no fetch(query, ctx), "
                            f"fetchContext(query, ctx) or provide(branch, instruction)")
    return list(providers)


def _check_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(options) - set(RESOLVE_OPTIONS))
    if unknown:
        raise InvalidType(f"{where}: unknown option {unknown[0]!r} "
                        f"(accepted: {', '.join(RESOLVE_OPTIONS)})")
    return {"timeout": DEFAULT_TIMEOUT, **options}


def check_run_context(run_context: Any, where: str) -> Any:
    """``run_context=`` as given: ``None``, a callable or a context value."""
    if isinstance(run_context, (str, bytes, int, float)):
        raise InvalidType(f"{where}: run_context must be a RunContext, a mapping, an object "
                          f"with its fields or a callable, got {run_context!r}")
    return run_context


def text_of(value: Any) -> str:
    """The text of a maybe multimodal prompt: a ``str``, else its text parts (``str``
    items, ``text``/``content`` keys or attributes) joined by newlines."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(t for t in (text_of(part) for part in value) if t)
    keyed = isinstance(value, Mapping)
    for key in ("text", "content"):
        inner = value.get(key) if keyed else getattr(value, key, None)
        if isinstance(inner, str):
            return inner
        if keyed and isinstance(inner, (list, tuple)):  # a message's parts
            return text_of(inner)
    return ""


_FILLED = ("user_id", "tenant_id", "session_id", "signal")
_FILLED_DICTS = ("metadata", "session_state", "dependencies")


def merge_run_context(own: Any) -> RunContext:
    """``own`` (the host's run context, any shape), the bound run context filling every
    field it leaves unset; the host's values win field by field."""
    bound = bound_run_context()
    if own is None:
        return bound if bound is not None else RunContext()
    ctx = coerce_run_context(own)
    if bound is None or bound is ctx:
        return ctx
    # The bound values of the fields the host left unset (a None scalar, an empty dict).
    fills = {name: getattr(bound, name) for name in _FILLED
             if getattr(ctx, name) is None and getattr(bound, name) is not None}
    fills.update({name: getattr(bound, name) for name in _FILLED_DICTS
                  if not getattr(ctx, name) and getattr(bound, name)})
    if not isinstance(own, RunContext) and _read(own, "run_id", None) is None:
        fills["run_id"] = bound.run_id
    missing = {k: v for k, v in bound.extra.items() if k not in ctx.extra}
    if missing:
        fills["extra"] = {**missing, **ctx.extra}
    return dataclasses.replace(ctx, **fills) if fills else ctx


async def host_context(mapper: Any, native: Any, *host: Any) -> RunContext:
    """A run's context: ``mapper(*host)`` (or ``mapper(host[0])`` when it takes one
    argument, awaited if need be) when callable, ``mapper`` when a value, else
    ``native``; the bound run context fills what it leaves unset."""
    own = native
    if callable(mapper):
        args = host
        if len(host) > 1:
            try:
                inspect.signature(mapper).bind(*host)
            except TypeError:
                args = host[:1]
            except ValueError:  # no signature to read (some builtins): give everything
                pass
        own = mapper(*args)
        if inspect.isawaitable(own):
            own = await own
    elif mapper is not None:
        own = mapper
    return merge_run_context(own)


#: holder -> {key: Report}: the reports of the runs a host object carries.
_REPORTS: WeakIdMap[dict[Any, Report]] = WeakIdMap()
#: Runs one host object keeps a report of (the latest): a host may give one object
#: (Pydantic AI's usage=) to every run of a long conversation.
RUNS_PER_HOLDER = 64


def tie_report(holder: Any, report: Report, key: Any = None) -> None:
    """Tie ``report`` to ``holder`` (and ``key``, for a holder shared by several runs)."""
    if (reports := _REPORTS.setdefault(holder, dict)) is not None:
        _keep(reports, key, report)


def tied_report(holder: Any, key: Any = None) -> Report | None:
    """The report tied to ``holder`` (and ``key``), or ``None``."""
    reports = _REPORTS.get(holder) if holder is not None else None
    return reports.get(key) if reports else None


V = TypeVar("V")


def _keep(table: dict[Any, Any], key: Any, value: V) -> V:
    table[key] = value
    if len(table) > RUNS_PER_HOLDER:
        del table[next(iter(table))]  # the oldest run's
    return value


class Once(Generic[V]):
    """A value the first caller computes while the others wait for it."""

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self.value: V | None = None

    async def get(self, make: Callable[[], Awaitable[V]]) -> V:
        """The value, made by ``make()`` on the first call."""
        if self.value is None:
            async with self._lock:
                if self.value is None:
                    self.value = await make()
        return self.value


_AUTO: Any = object()


class HostHook:
    """The hook a host calls before its model calls: it resolves ``providers`` once per
    run (named by a host object, ``holder``, and a ``key`` for a holder runs share).
    A host declares ``where`` (the name its errors use) and reads the rest itself."""

    where = "context_instructions"
    #: Sessions whose previous digests are kept (least recently used dropped first).
    BASELINES = 4096

    def __init__(self, providers: Any, *, run_context: Any = None, **options: Any) -> None:
        self.providers = _check_providers(providers, self.where)
        self._pass = resolve_pass(**_check_options(options, self.where),
                                  baselines=PrefixHistory(self.BASELINES), note_missing=True)
        self.run_context = check_run_context(run_context, self.where)
        #: How many times the providers were resolved (one per run).
        self.resolves = 0
        self._turns: WeakIdMap[dict[Any, Once[Resolution]]] = WeakIdMap()

    async def run_once(self, holder: Any, query: Any, native: Any, *host: Any, key: Any = None,
                       session: Any = None, previous: Any = _AUTO,
                       also: Any = None) -> Resolution:
        """The run's resolution: ``native`` is the host's own context, ``host`` what
        ``run_context=`` is called with; the report is tied to ``holder`` and ``also``."""
        ctx = await host_context(self.run_context, native, *host)
        resolution = await self.resolve(holder, query, ctx, key=key, session=session,
                                        previous=previous)
        for target in (holder, also):
            if target is not None:
                tie_report(target, resolution.report, key)
        return resolution

    async def resolve(self, holder: Any, query: Any, ctx: RunContext, *, key: Any = None,
                      session: Any = None, previous: Any = _AUTO) -> Resolution:
        """The run's resolution, computed on the first call. ``previous``: the digests
        to compare with (default: the session's previous run; given, the baseline stays)."""
        async def make() -> Resolution:
            keyed = previous is _AUTO
            named = ctx.session_id if ctx.session_id is not None else session
            # The baseline's key: the session (the context's, else the host's), user, tenant.
            scope = (None if not keyed or named is None
                     else tuple(map(scope_text, (ctx.tenant_id, ctx.user_id, named))))
            # Bound for the providers too, so nested lionctx code sees the same user.
            with bind_run_context(ctx):
                resolution = await resolve_with(self._pass, self.providers, text_of(query), ctx,
                                                previous=None if keyed else previous,
                                                session=scope)
            self.resolves += 1
            logger.debug("resolved context for a run: fired=%s", resolution.fired)
            return resolution

        turns = self._turns.setdefault(holder, dict)
        if turns is None:  # a holder that cannot be tied: one resolve per call
            return await make()
        return await (turns.get(key) or _keep(turns, key, Once[Resolution]())).get(make)

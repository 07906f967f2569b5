"""Face two: agentium's ``resolveContextProviders`` on the same engine. Every
``fetch(query, ctx)`` runs concurrently (allSettled); text is wrapped in
``<context name="...">`` tags joined by a blank line, the rest left out.
:func:`resolve_context` also returns the outcomes (a :class:`Resolution`)."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from operator import is_
from types import MethodType
from typing import Any

from ._adapters import fetch_invoker, provider_name
from ._breaker import DEFAULT_BREAKERS, BreakerSettings, coerce_breakers
from ._context import coerce_run_context
from ._dedupe import HistoryIndex
from ._exceptions import InvalidType
from ._gather import TAG_FRAME, Observer, ProviderCall
from ._literals import with_object_literals
from ._pass import UNKEYED as _UNKEYED
from ._pass import ContextPass, Sources
from ._policy import Policy
from ._safe_text import read_attr
from ._stability import Digests, PrefixHistory, session_key
from ._suggest import checked_keywords
from ._tokens import TokenCounter
from ._types import Number
from ._views import Resolution
from ._weakid import WeakIdMap

__all__ = ["DEFAULT_TIMEOUT", "Resolution", "resolve_context", "resolve_context_providers"]

#: Seconds each provider gets by default on this face (and an ``Agent``'s), so one
#: hung source cannot hang every turn; ``timeout=None`` lifts it.
DEFAULT_TIMEOUT = 10.0


class _Call(ProviderCall):
    """A provider's call in a resolve: tag-framed, kept framed, no limits of its own.
    Only the three fields that differ are set (the rest are class constants)."""

    __slots__ = ()
    frame: Callable[[str], str] | None = TAG_FRAME
    timeout = None
    priority = 0
    max_tokens = None
    max_chars = None
    keep_frame = True

    def __init__(self, name: str, provider: Any, invoke: Any) -> None:
        self.name = name
        self.provider = provider
        self.invoke = invoke


class _HeldCall(_Call):
    """A :class:`_Call` kept across resolves, holding its provider (and so its
    ``fetch``) weakly: one built per request is not kept alive."""

    __slots__ = ("_func", "_last", "_ref", "cls", "raw")

    def __init__(self, name: str, p: Any, raw: str, func: Any) -> None:
        self.name, self._ref, self._func = name, weakref.ref(p), func
        self.cls, self.raw = type(p), raw  # what tells the call is still p's own
        self._last: tuple[str, str] | None = None

    def framed(self, text: str) -> str:
        # The last block again for the same text object (a block is its name's and its
        # text's alone): the realistic table's "resolve_context, stable texts" row.
        last = self._last
        if last is None or last[0] is not text:
            last = self._last = (text, super().framed(text))
        return last[1]

    @property
    def provider(self) -> Any:
        return self._ref()

    @property
    def invoke(self) -> Any:  # type: ignore[override]
        return MethodType(self._func, self._ref())


# Each provider's call, kept while it lives (no call, invoker or name made per resolve, so
# the collector walks no heap): "resolve N=30,000 vs N=1,000", the curves' resolve rows.
_HELD: WeakIdMap[_HeldCall] = WeakIdMap()
#: Providers held at most (live ones only: each entry goes with its provider).
_HELD_MAX = 65_536
# The last pass's held calls and their breakers, not looked up again: "resolve_context, stable"
_LAST_HELD: list[tuple[Any, Any]] = [((), None)]


def _calls_of(providers: Sequence[Any], only_held: bool = False) -> list[ProviderCall]:
    """Each provider's call, the held one while it stands for it (``only_held``: all or none)."""
    held_get: Callable[[int], Any] = _HELD._items.get  # WeakIdMap.get inline: the stable row
    out: list[ProviderCall] = []
    for p in providers:
        item = held_get(id(p))
        if item is not None and item[0]() is p:
            held = item[1]
            try:  # the same class, name and fetch function as when it was built
                fetch = p.fetch
                if (type(p) is held.cls and p.name is held.raw and type(fetch) is MethodType
                        and fetch.__func__ is held._func and fetch.__self__ is p):
                    out.append(held)
                    continue
            except Exception:  # a property that raises: built the long way below
                pass
        if only_held:
            return []
        out.append(_call_of(p))
    return out


def _call_of(p: Any) -> ProviderCall:
    name, invoke = provider_name(p, agentium=True), fetch_invoker(p)
    try:
        raw: Any = getattr(p, "name", None)
        plain = (raw.__class__ is str and raw is name and type(invoke) is MethodType
                 and invoke.__self__ is p and getattr(p, "fetch", None) == invoke)
    except Exception:
        plain = False
    if plain and _HELD.held() < _HELD_MAX:
        held = _HELD.setdefault(p, partial(_HeldCall, name, p, raw, invoke.__func__))
        if held is not None and held._func is invoke.__func__ and held.raw is raw:
            return held
    return _Call(name, p, invoke)


def resolve_pass(*, timeout: float | None = DEFAULT_TIMEOUT, deadline: float | None = None,
                 budget: Number | None = None, limit: int | None = None,
                 counter: str | TokenCounter | None = None, on_outcome: Observer | None = None,
                 max_chars: int | None = None, breaker: Any = True, dedupe: bool = False,
                 baselines: PrefixHistory | None = None,
                 note_missing: bool = False) -> ContextPass:
    """The agentium face's pass from :func:`resolve_context`'s options, each checked
    here (the one place ``resolve_context``, ``Agent`` and the integrations share)."""
    if baselines is not None and not isinstance(baselines, PrefixHistory):
        raise InvalidType(f"baselines must be a PrefixHistory, got {baselines!r}")
    return ContextPass(Policy(timeout, deadline, limit, counter, on_outcome, max_chars),
                       budget=budget, concurrent=True, dedupe=dedupe, baselines=baselines,
                       breakers=coerce_breakers(breaker, DEFAULT_BREAKERS),
                       note_missing=note_missing)


async def resolve_with(context_pass: ContextPass, providers: Sequence[Any], query: str,
                       ctx: Any = None, *, previous: Digests | None = None, session: Any = None,
                       history: HistoryIndex | None = None, calls: Any = None) -> Resolution:
    """One agentium-face pass over checked ``providers`` (``calls``: theirs); the baseline is
    ``previous``, or ``session``'s (a key, or a function of the run context) in ``baselines``."""
    run_ctx = coerce_run_context(ctx)
    if callable(session):
        session = session(run_ctx)
    keyed = session is not None and context_pass.baselines is not None
    given, calls = bool(calls), calls or _calls_of(providers)  # given: all held
    sources = Sources(providers, lambda i: (calls[i].name, 0, None),
                      [read_attr(p, "volatile") is True for p in providers])
    last = _LAST_HELD[0]  # the same held calls as the last pass: the same live providers
    sources.held = last[1] if len(last[0]) == len(calls) and all(map(is_, last[0], calls)) else None
    report = await context_pass.run(calls, (query, run_ctx), sources, context=lambda: run_ctx,
                                    session=session if keyed else _UNKEYED, previous=previous,
                                    history=history, framed=True)
    if given:  # held calls hold their providers weakly: none kept alive here
        _LAST_HELD[0] = (calls, sources.held)
    return Resolution(report)  # its text: stable blocks first, then volatile


@checked_keywords
async def resolve_context(
    providers: Sequence[Any],
    query: str,
    ctx: Any = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    deadline: float | None = None,
    budget: Number | None = None,
    limit: int | None = None,
    counter: str | TokenCounter | None = None,
    on_outcome: Observer | None = None,
    max_chars: int | None = None,
    breaker: Any = True,
    dedupe: bool = False,
    previous: Any = None,
    history: HistoryIndex | Sequence[str | Mapping[str, Any]] | None = None,
    baselines: PrefixHistory | None = None,
) -> Resolution:
    """Resolve ``providers`` for ``query``: the merged string with its outcomes.

    ``ctx``: a :class:`~lionctx._context.RunContext`, or a mapping or object shaped like
    one (snake_case or camelCase keys). A provider may be an object literal
    (``{"name": ..., "fetch": ...}``); one with a true ``volatile`` renders last.
    ``timeout`` (per provider, default :data:`DEFAULT_TIMEOUT`; ``None``: none) and
    ``deadline`` (the pass) are seconds; ``limit``: how many run at once. ``budget``:
    blocks are admitted greedily in list order until their tagged tokens spend it.
    ``counter``: a tiktoken encoding name or a ``str -> int`` callable. ``on_outcome``
    gets each outcome when known. ``max_chars`` (default 4,000,000): longer text is
    skipped uncounted.

    ``breaker``: ``True`` (default) the process-wide circuit breakers, one per source,
    failures counted per user and tenant where a provider reads them
    (``docs/breakers.md``); ``False`` off; or a ``Breakers``/``BreakerSettings``.
    ``dedupe=True``: a text two providers return is injected once. ``previous``: the
    last turn's :class:`Resolution` or its digests; the result then says whether its
    text is byte-identical and, if not, which block changed first. ``baselines``: a
    :class:`~lionctx._stability.PrefixHistory` keeping each session's last turn instead
    (not with ``previous``). ``history``: the conversation's messages (or a
    ``HistoryIndex``); a block an assistant, tool or later system message holds whole
    is skipped (a ``str`` item is system-side text; ``docs/dedupe.md``).
    """
    if isinstance(providers, (str, bytes)) or not isinstance(providers, Sequence):
        raise InvalidType(f"providers must be a list of context providers, got {providers!r}")
    calls = _calls_of(providers, only_held=True)  # all held: no literal among them (stable row)
    if not calls:
        providers = with_object_literals(providers, "providers")  # {"name", "fetch"} mappings
    if not isinstance(query, str):
        raise InvalidType(f"query must be a str, got {type(query).__name__}")
    options = {"timeout": timeout, "deadline": deadline, "budget": budget, "limit": limit,
               "counter": counter, "on_outcome": on_outcome, "max_chars": max_chars,
               "breaker": breaker, "dedupe": dedupe, "baselines": baselines}
    plain = _PLAIN.issuperset(map(type, options.values()))
    context_pass = (_kept_pass if plain else resolve_pass)(**options)
    prior = _previous_digests(previous)
    if baselines is not None and previous is not None:
        raise InvalidType("pass previous or baselines, not both")
    return await resolve_with(context_pass, providers, query, ctx, previous=prior,
                              session=session_key if baselines is not None else None,
                              history=_history_index(history), calls=calls)


# A pass kept per set of plain options (typed: timeout=True is refused, not taken for 1):
# "resolve_context, stable texts". It keeps only the process-wide breakers between calls.
_PLAIN = frozenset({type(None), bool, int, float, str, BreakerSettings})
_kept_pass = functools.lru_cache(maxsize=256, typed=True)(resolve_pass)


def _history_index(history: Any) -> HistoryIndex | None:
    if history is None or isinstance(history, HistoryIndex):
        return history
    if isinstance(history, (str, bytes, Mapping)) or not isinstance(history, Sequence):
        raise InvalidType(f"history must be a list of messages or a HistoryIndex, "
                          f"got {history!r}")
    index = HistoryIndex()
    index.update(history)  # its latest max_messages messages: bounded
    return index


def _previous_digests(previous: Any) -> Digests | None:
    if previous is None:
        return None
    if isinstance(previous, Resolution):
        return previous.digests
    if isinstance(previous, (tuple, list)) and all(
            isinstance(d, (tuple, list)) and len(d) == 2 for d in previous):
        return tuple((str(a), str(b)) for a, b in previous)
    raise InvalidType(f"previous must be a Resolution or its digests, got {previous!r}")


async def resolve_context_providers(
    providers: Sequence[Any],
    query: str,
    ctx: Any = None,
    **options: Any,
) -> str:
    """agentium's ``resolveContextProviders``: the merged ``<context>`` string
    (the same keyword options as :func:`resolve_context`)."""
    return (await resolve_context(providers, query, ctx, **options)).text

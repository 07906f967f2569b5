"""Face one: LionAGI's ``ContextProviderRegistry`` and ``ProviderReport``.

Semantics follow ADR-0008 D1, D2, D3, D5 and D7 and the shipped LionAGI 0.36:
sequential retrieval in registration order by default, exceptions contained per
provider, per-provider caps then a greedy priority budget, blocks in registration
order, six accumulating ``stats`` counters, writeback after ``operate`` actions.

Beyond LionAGI, without changing its five report lists: every report also carries
one :class:`~lionctx._outcome.Outcome` per provider (status, reason, tokens, duration),
the budget and the tokens used (:class:`ProviderReport` is a view of the one
:class:`~lionctx._report.Report`, its ``report``); a registry can opt into
concurrent retrieval, a per-provider timeout and a deadline; values that could only
fail mid-turn (a ``None`` priority, a non-numeric cap or budget) are refused when
they are set.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from time import perf_counter
from typing import Any, Protocol, runtime_checkable

from . import _production
from ._adapters import provide_invoker, provider_name, run_context_from_branch
from ._breaker import Breakers, BreakerSettings, coerce_breakers
from ._dedupe import HistoryIndex, skip_seen, text_key
from ._exceptions import InvalidType
from ._gather import Observer, ProviderCall, gather
from ._outcome import Outcome, Status
from ._policy import Policy, check_max_chars, check_number, check_seconds
from ._render import tag_block
from ._report import Report, build_report
from ._stability import PrefixHistory, check_max_sessions, session_key
from ._tokens import TokenCounter, resolve_counter
from ._types import Number
from ._views import ProviderReport

__all__ = ["ContextProvider", "ContextProviderRegistry", "ProviderReport"]

from ._log import logger_for

logger = logger_for(__name__)



@runtime_checkable
class ContextProvider(Protocol):
    """LionAGI's structural provider protocol."""

    async def provide(self, branch: Any, instruction: Any) -> str | None: ...


@dataclass(slots=True, eq=False, weakref_slot=True)
class _Entry:
    # Compared and held by identity, weakly: an entry is its breaker's key.
    provider: Any
    priority: Number
    max_tokens: Number | None
    name: str
    timeout: float | None = None
    max_chars: int | None = None
    volatile: bool = False

    @property
    def source_identity(self) -> Any:
        """The provider's stated identity: its breaker is the source's."""
        return getattr(self.provider, "source_identity", None)

    @property
    def context_fields(self) -> Any:
        """The run-context fields the provider reads: its failures are per caller."""
        return getattr(self.provider, "context_fields", ())


def _text_key(o: Outcome) -> str:
    return text_key(o.text or "")


_STAT_KEYS = ("recall_turns", "blocks_injected", "failed", "degraded_turns",
              "writeback_records", "writeback_failed")


class ContextProviderRegistry:
    """An ordered list of context providers with priorities, caps and a total budget.

    ``budget`` (default 2000 tokens) bounds the text kept per pass. By default
    providers run one after another (LionAGI); ``concurrent=True`` runs them
    together, ``timeout`` bounds each provider (seconds; ``register`` can override
    it per provider), ``deadline`` bounds the whole pass, ``limit`` caps how many run
    at once. ``counter`` is a tiktoken encoding name or a ``str -> int`` callable.
    ``max_chars`` is the size limit of one provider's text (default 4,000,000
    characters; ``register`` can override it): longer text is skipped uncounted.

    Production: ``breaker`` (default ``True``) gives each provider a
    circuit breaker, counting a failure for the caller it belongs to (the bound run
    context's user and tenant, where the provider reads them) or for the source
    (see :mod:`lionctx._breaker`; ``False`` turns them off, a
    :class:`~lionctx._breaker.BreakerSettings` or :class:`~lionctx._breaker.Breakers`
    configures them); ``dedupe=True`` skips a block whose text an earlier provider
    of the same pass returned (the copy admission keeps: see ``docs/dedupe.md``).
    Every report carries ``prefix_stable`` and ``cache_break`` against the previous
    pass of the same session (:func:`~lionctx._stability.session_key` of the
    branch's run context, else the branch itself; the latest ``max_sessions``
    sessions are kept) (``digests=False``: no block digests and no cache-break report).
    """

    def __init__(
        self,
        budget: Number = 2000,
        *,
        concurrent: bool = False,
        timeout: float | None = None,
        deadline: float | None = None,
        limit: int | None = None,
        counter: str | TokenCounter | None = None,
        on_outcome: Observer | None = None,
        max_chars: int | None = None,
        breaker: Any = True,
        dedupe: bool = False,
        digests: bool = True,
        max_sessions: int = 1024,
    ) -> None:
        self._entries: list[_Entry] = []
        # The calls of a pass, built once per (entries, tagged, digests) and reused: a
        # pass allocates nothing per provider but its outcome.
        self._calls: dict[tuple[bool, bool], list[ProviderCall]] = {}
        # The shared knobs, frozen and checked in one place; setters swap the policy.
        self._policy = Policy(timeout, deadline, limit, counter, on_outcome, max_chars)
        # Per-provider circuit breakers (None: off), in-pass dedupe, and
        # the previous pass's block digests (for the cache-break report).
        self.breakers: Breakers | None = (
            Breakers(breaker) if isinstance(breaker, BreakerSettings)  # a board of its own
            else coerce_breakers(breaker))
        self.dedupe = bool(dedupe)
        self.digests = bool(digests)
        self._baselines = PrefixHistory(check_max_sessions(max_sessions))
        # each conversation's index of what the system side said (dedupe_history)
        self._seen: weakref.WeakKeyDictionary[Any, HistoryIndex] = weakref.WeakKeyDictionary()
        self.budget = budget
        self.concurrent = bool(concurrent)
        self._counter: TokenCounter | None = None
        self.stats: dict[str, int] = dict.fromkeys(_STAT_KEYS, 0)

    # -- settings, checked when set ---------------------------------------------
    @property
    def policy(self) -> Policy:
        """The shared knobs (timeout, deadline, limit, counter, observer, size limit)."""
        return self._policy

    @property
    def budget(self) -> Number:
        """Total tokens a pass may keep. Mutable; must be a number."""
        return self._budget

    @budget.setter
    def budget(self, value: Number) -> None:
        self._budget = check_number(value, "budget", allow_none=False)

    @property
    def timeout(self) -> float | None:
        """Default per-provider timeout in seconds, or None."""
        return self._policy.timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        self._policy = self._policy.replace(timeout=value)

    @property
    def deadline(self) -> float | None:
        """Deadline for a whole pass in seconds, or None."""
        return self._policy.deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._policy = self._policy.replace(deadline=value)

    @property
    def max_chars(self) -> int | None:
        """Size limit of one provider's text in characters (None: the default)."""
        return self._policy.max_chars

    @max_chars.setter
    def max_chars(self, value: int | None) -> None:
        self._policy = self._policy.replace(max_chars=value)

    @property
    def limit(self) -> int | None:
        """How many providers may run at once in concurrent mode, or None."""
        return self._policy.limit

    @limit.setter
    def limit(self, value: int | None) -> None:
        self._policy = self._policy.replace(limit=value)

    @property
    def on_outcome(self) -> Observer | None:
        """Called with each provider's outcome as soon as it is known (live progress)."""
        return self._policy.observer

    @on_outcome.setter
    def on_outcome(self, value: Observer | None) -> None:
        self._policy = self._policy.replace(observer=value)

    # -- registration ------------------------------------------------------------
    def register(
        self,
        provider: Any,
        *,
        priority: Number = 0,
        max_tokens: Number | None = None,
        name: str | None = None,
        timeout: float | None = None,
        max_chars: int | None = None,
        volatile: bool | None = None,
    ) -> None:
        """Append ``provider``. No replacement by name.

        The name is ``name``, else a truthy ``provider.name``, else the class name.
        ``max_tokens`` caps this provider's block (falsy: no cap; strict ``>``).
        ``priority`` decides who survives a budget conflict (higher first).
        ``timeout`` overrides the registry's per-provider timeout and ``max_chars``
        its size limit.
        ``volatile=True`` marks a source whose text changes from turn to turn: a
        tag-rendering branch puts its block after every stable one (prompt caches).
        ``None`` (default) takes the provider's own ``volatile`` attribute when it is
        ``True``.
        """
        priority = check_number(priority, "priority", allow_none=False)
        max_tokens = check_number(max_tokens, "max_tokens", allow_none=True)
        if name is not None and not isinstance(name, str):
            raise InvalidType(f"name must be a str or None, got {name!r}")
        timeout = check_seconds(timeout, "timeout")
        max_chars = check_max_chars(max_chars)
        if volatile is None:
            volatile = getattr(provider, "volatile", False) is True
        if not isinstance(volatile, bool):
            raise InvalidType(f"volatile must be a bool, got {volatile!r}")
        self._entries.append(
            _Entry(provider, priority, max_tokens, provider_name(provider, name), timeout,
                   max_chars, volatile)
        )
        self._calls.clear()

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Any]:
        return (e.provider for e in self._entries)

    @property
    def names(self) -> list[str]:
        """Provider names in registration order (a new list each time)."""
        return [e.name for e in self._entries]

    def copy(self) -> ContextProviderRegistry:
        """A registry with the same entries and settings and fresh stats."""
        p = self._policy
        new = ContextProviderRegistry(
            self._budget, concurrent=self.concurrent, timeout=p.timeout,
            deadline=p.deadline, limit=p.limit, counter=p.counter,
            on_outcome=p.observer, max_chars=p.max_chars,
            breaker=(Breakers(self.breakers.settings, clock=self.breakers.clock,
                              max_sources=self.breakers.max_sources,
                              max_callers=self.breakers.max_callers)
                     if self.breakers is not None else False),
            dedupe=self.dedupe, digests=self.digests,
            max_sessions=self._baselines.max_sessions,
        )
        new._entries = [
            _Entry(e.provider, e.priority, e.max_tokens, e.name, e.timeout, e.max_chars,
                   e.volatile)
            for e in self._entries
        ]
        return new

    # -- passes ----------------------------------------------------------------
    def _get_counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = resolve_counter(self._policy.counter)
        return self._counter

    def skipped_report(self) -> ProviderReport:
        """The report of a pass that called nobody (a systemless branch)."""
        outcomes = tuple(
            Outcome(e.name, i, Status.SKIPPED, reason="branch has no system message",
                    priority=e.priority, max_tokens=e.max_tokens)
            for i, e in enumerate(self._entries))
        return ProviderReport(report=Report(outcomes, self._budget,
                                            skip_order=tuple(range(len(outcomes)))))

    async def gather(self, branch: Any, instruction: Any, *, tagged: bool = False
                     ) -> ProviderReport:
        """Run every provider's ``provide(branch, instruction)`` and select within budget.

        LionAGI counts each block's bare text. ``tagged=True`` (what a branch that
        renders ``<context>`` tags passes) counts each block as it is sent, tag and
        joining blank line included, so the budget bounds the bytes the model gets;
        ``blocks`` still hold the bare text.
        """
        entries = self._entries
        if not entries:
            return ProviderReport()
        started = perf_counter()
        hooks = _production.PassHooks.start(self.breakers, entries,  # breakers, dedupe, traces
                                     partial(run_context_from_branch, branch))
        policy = self._policy
        tagged = bool(tagged)
        digests = bool(self.digests)
        calls = self._calls.get((tagged, digests))
        if calls is None:
            calls = self._calls[tagged, digests] = [
                ProviderCall(e.name, e.provider, provide_invoker(e.provider),
                             partial(tag_block, e.name) if tagged else None, e.timeout,
                             e.priority, e.max_tokens, e.max_chars, False, digests)
                for e in entries
            ]
        timing: dict[str, float] = {}
        outcomes = await gather(
            hooks.select(calls),  # the calls the breakers let through
            counter=self._get_counter(), concurrent=self.concurrent,
            timeout=policy.timeout, deadline=policy.deadline, limit=policy.limit,
            observe=hooks.observer(policy.observer),  # breakers and traces see outcomes
            budget=self._budget, max_chars=policy.max_chars,
            timing=timing, args=(branch, instruction),
        )
        outcomes = self._merge(hooks, outcomes, branch)
        outcomes = self._skip_seen(outcomes, branch)
        session = session_key(getattr(branch, "run_context", None), branch) if digests else None
        previous = self._baselines.latest(session) if digests else None
        report = build_report(outcomes, self._budget, previous=previous,
                              digests=digests, started=started,
                              tokenizer_load_ms=timing.get("tokenizer_load_ms", 0.0),
                              dedupe=_text_key if self.dedupe else None)
        if digests:
            self._baselines.swap(session, report.digests)
        hooks.finish("lionagi", report, concurrent=self.concurrent)  # spans, when traced
        view = ProviderReport(report=report)
        self._count(view)
        return view

    # -- production steps: breakers, digests and cache break, traces --------------
    def _merge(self, hooks: _production.PassHooks, outcomes: list[Outcome],
                   branch: Any) -> list[Outcome]:
        entries = self._entries
        volatile: list[bool] | None = [e.volatile for e in entries]
        if True not in volatile:  # type: ignore[operator]
            volatile = None
        return hooks.merge(
            outcomes, len(entries),
            lambda i: (entries[i].name, entries[i].priority, entries[i].max_tokens),
            volatile)

    def _skip_seen(self, outcomes: list[Outcome], branch: Any) -> list[Outcome]:
        """``dedupe_history``: skip a block the branch's system side already holds."""
        if not getattr(branch, "dedupe_history", False):
            return outcomes
        try:
            index = self._seen.get(branch)
            if index is None:
                index = self._seen[branch] = HistoryIndex()
        except TypeError:  # an owner that cannot be weakly keyed: a fresh, bounded index
            index = HistoryIndex()
        index.update(getattr(branch, "messages", ()))
        return skip_seen(outcomes, index)

    def _count(self, report: ProviderReport) -> None:
        stats = self.stats
        if report.fired:
            stats["recall_turns"] += 1
            stats["blocks_injected"] += len(report.fired)
        stats["failed"] += len(report.failed)
        if report.degraded:
            stats["degraded_turns"] += 1

    async def gather_writeback(self, branch: Any, action_responses: list[Any]) -> None:
        """Call each provider's optional ``writeback(branch, action_responses)`` in order.

        An ``int`` return adds to ``stats["writeback_records"]``; an ``Exception``
        adds to ``stats["writeback_failed"]``, is logged, and the next hook still runs.
        """
        for entry in list(self._entries):
            try:
                hook = getattr(entry.provider, "writeback", None)
                if hook is None:
                    continue
                result = await hook(branch, action_responses)
            except Exception:
                self.stats["writeback_failed"] += 1
                logger.warning("context provider '%s' writeback raised; skipping",
                               entry.name, exc_info=True)
                continue
            if isinstance(result, int):
                self.stats["writeback_records"] += result

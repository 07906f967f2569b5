"""Face one: LionAGI's ``ContextProviderRegistry`` and ``ProviderReport``.

Semantics follow ADR-0008 D1, D2, D3, D5 and D7 and the shipped LionAGI 0.36:
sequential retrieval in registration order by default, exceptions contained per
provider, per-provider caps then a greedy priority budget, blocks in registration
order, six accumulating ``stats`` counters, writeback after ``operate`` actions.

Beyond LionAGI, without changing its five report lists: every report also carries
one :class:`~lionctx.outcome.Outcome` per provider (status, reason, tokens, duration),
the budget and the tokens used; a registry can opt into concurrent retrieval, a
per-provider timeout and a deadline; values that could only fail mid-turn (a
``None`` priority, a non-numeric cap or budget) are refused when they are set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter
from typing import Any, Protocol, runtime_checkable

from . import production as _p13  # issue 13: breakers, dedupe, digests, traces
from ._exceptions import InvalidType
from ._policy import Policy, check_max_chars, check_number, check_seconds
from ._types import Number
from .adapters import provide_invoker, provider_name
from .admission import admit_columns
from .breaker import Breakers, BreakerSettings, coerce_breakers
from .gather import Observer, ProviderCall, gather
from .outcome import Outcome, Status
from .render import tag_block
from .tokens import TokenCounter, resolve_counter

__all__ = ["ContextProvider", "ContextProviderRegistry", "ProviderReport"]

logger = logging.getLogger(__name__)



@runtime_checkable
class ContextProvider(Protocol):
    """LionAGI's structural provider protocol."""

    async def provide(self, branch: Any, instruction: Any) -> str | None: ...


@dataclass(frozen=True)
class ProviderReport:
    """What one provider pass did.

    The first five fields are LionAGI's: ``blocks[i]`` and ``fired[i]`` describe the
    same kept block, in registration order; ``fired`` rows are
    ``{"provider_name", "tokens"}``; ``skipped`` lists cap skips then budget skips;
    ``failed`` lists providers that raised, returned a non-string or timed out;
    ``degraded`` rows are ``{"provider_name", "reason"}``.
    """

    blocks: list[str] = field(default_factory=list)
    fired: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    degraded: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    """One row per registered provider, in registration order."""
    budget: Number | None = None
    used_tokens: int = 0
    """Tokens of the kept blocks."""
    offered_tokens: int = 0
    """Tokens of every block providers returned, kept or not."""
    duration_ms: float = 0.0
    """Wall time of the pass, not counting the one-time tokenizer load."""
    tokenizer_load_ms: float = 0.0
    """Time spent loading the token encoding before any provider started (the
    first pass in a process only; 0 afterwards)."""
    cache_break: Any | None = None
    """The first block that differs from the previous pass's (a
    :class:`~lionctx.stability.CacheBreak`), ``None`` when none does."""
    prefix_stable: bool | None = None
    """The injected blocks are byte-identical to the previous pass's (``None`` on the
    first pass)."""

    @property
    def names(self) -> list[str]:
        """Names of the kept blocks, in order."""
        return [row["provider_name"] for row in self.fired]

    def to_dict(self, *, include_text: bool = False) -> dict[str, Any]:
        """A JSON-ready view of the report."""
        return {
            "fired": [dict(r) for r in self.fired],
            "skipped": list(self.skipped),
            "failed": list(self.failed),
            "degraded": [dict(r) for r in self.degraded],
            "budget": self.budget,
            "used_tokens": self.used_tokens,
            "offered_tokens": self.offered_tokens,
            "duration_ms": self.duration_ms,
            "tokenizer_load_ms": self.tokenizer_load_ms,
            "outcomes": [o.to_dict(include_text=include_text) for o in self.outcomes],
            "prefix_stable": self.prefix_stable,
            "cache_break": self.cache_break.to_dict() if self.cache_break is not None else None,
            **({"blocks": list(self.blocks)} if include_text else {}),
        }


@dataclass(slots=True)
class _Entry:
    provider: Any
    priority: Number
    max_tokens: Number | None
    name: str
    timeout: float | None = None
    max_chars: int | None = None
    volatile: bool = False


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

    Production (issue 13): ``breaker`` (default ``True``) gives each provider a
    circuit breaker (see :mod:`lionctx.breaker`; ``False`` turns them off, a
    :class:`~lionctx.breaker.BreakerSettings` or :class:`~lionctx.breaker.Breakers`
    configures them); ``dedupe=True`` skips a block whose text an earlier provider
    of the same pass returned. Every report carries ``prefix_stable`` and
    ``cache_break`` against this registry's previous pass (``digests=False``: no
    block digests and no cache-break report).
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
    ) -> None:
        self._entries: list[_Entry] = []
        # The calls of a pass, built once per (entries, tagged) and reused: a pass
        # allocates nothing per provider but its outcome.
        self._calls: dict[bool, list[ProviderCall]] = {}
        # The shared knobs, frozen and checked in one place; setters swap the policy.
        self._policy = Policy(timeout, deadline, limit, counter, on_outcome, max_chars)
        # issue 13: per-provider circuit breakers (None: off), in-pass dedupe, and
        # the previous pass's block digests (for the cache-break report).
        self.breakers: Breakers | None = (
            Breakers(breaker) if isinstance(breaker, BreakerSettings)  # a board of its own
            else coerce_breakers(breaker))
        self.dedupe = bool(dedupe)
        self.digests = bool(digests)
        self._last_digests: tuple[tuple[str, str], ...] | None = None
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
            breaker=(Breakers(self.breakers.settings, clock=self.breakers.clock)
                     if self.breakers is not None else False),
            dedupe=self.dedupe, digests=self.digests,
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
        names = self.names
        return ProviderReport(
            skipped=names,
            outcomes=[
                Outcome(e.name, i, Status.SKIPPED, reason="branch has no system message",
                        priority=e.priority, max_tokens=e.max_tokens)
                for i, e in enumerate(self._entries)
            ],
            budget=self._budget,
        )

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
        hooks = _p13.PassHooks.start(self.breakers, entries)  # breakers, dedupe, digests, traces
        policy = self._policy
        tagged = bool(tagged)
        calls = self._calls.get(tagged)
        if calls is None:
            calls = self._calls[tagged] = [
                ProviderCall(e.name, e.provider, provide_invoker(e.provider),
                             partial(tag_block, e.name) if tagged else None, e.timeout,
                             e.priority, e.max_tokens, e.max_chars, False)
                for e in entries
            ]
        timing: dict[str, float] = {}
        outcomes = await gather(
            hooks.select(calls),  # issue 13: was `calls`
            counter=self._get_counter(), concurrent=self.concurrent,
            timeout=policy.timeout, deadline=policy.deadline, limit=policy.limit,
            observe=hooks.observer(policy.observer),  # breakers and traces see outcomes
            budget=self._budget, max_chars=policy.max_chars,
            timing=timing, args=(branch, instruction),
        )
        outcomes = self._p13_merge(hooks, outcomes, branch)  # issue 13
        report = build_report(outcomes, self._budget)
        self._p13_finish(hooks, report)  # issue 13
        load = timing.get("tokenizer_load_ms", 0.0)
        object.__setattr__(report, "tokenizer_load_ms", load)
        object.__setattr__(report, "duration_ms", (perf_counter() - started) * 1000.0 - load)
        self._count(report)
        return report

    # -- issue 13 hooks: breakers, dedupe, digests and cache break, traces --------
    def _p13_merge(self, hooks: _p13.PassHooks, outcomes: list[Outcome],
                   branch: Any) -> list[Outcome]:
        entries = self._entries
        history = None
        if getattr(branch, "dedupe_history", False):
            from .messages import message_text

            history = [message_text(m) for m in getattr(branch, "messages", ())
                       if m.get("role") != "system"]
        volatile: list[bool] | None = [e.volatile for e in entries]
        if True not in volatile:  # type: ignore[operator]
            volatile = None
        return hooks.merge(
            outcomes, len(entries),
            lambda i: (entries[i].name, entries[i].priority, entries[i].max_tokens),
            volatile, dedupe_on=self.dedupe, history=history)

    def _p13_finish(self, hooks: _p13.PassHooks, report: ProviderReport) -> None:
        current, brk, stable = hooks.finish(
            "lionagi", report.outcomes, self._last_digests, concurrent=self.concurrent,
            budget=self._budget, used_tokens=report.used_tokens, digests=self.digests)
        self._last_digests = current
        object.__setattr__(report, "cache_break", brk)
        object.__setattr__(report, "prefix_stable", stable)

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


# Enum members read once: on Python 3.11 each ``Status.X`` costs about 90 ns (the
# enum metaclass's __getattr__ hook), four times per provider per pass here.
_FIRED, _FAILED, _TIMEOUT, _SKIPPED_SIZE = (Status.FIRED, Status.FAILED, Status.TIMEOUT,
                                            Status.SKIPPED_SIZE)


def _tokens(o: Outcome) -> str:
    return f"{o.tokens} tokens" if o.exact else f"at least {o.tokens} tokens (counting stopped)"


def build_report(outcomes: list[Outcome], budget: Number | None) -> ProviderReport:
    """Admission over gathered outcomes, then LionAGI's report lists."""
    texted = [o for o in outcomes if o.status is _FIRED]
    decision = admit_columns([o.tokens for o in texted], [o.priority for o in texted],
                             [o.max_tokens for o in texted], budget)
    for i in decision.skipped_cap:
        o = texted[i]
        o.status = Status.SKIPPED_CAP
        o.reason = f"{_tokens(o)} over its cap of {o.max_tokens:g}"
    for i, room in zip(decision.skipped_budget, decision.room, strict=False):
        o = texted[i]
        o.status = Status.SKIPPED_BUDGET
        o.reason = f"{_tokens(o)} did not fit the {room:g} left of budget {budget:g}"
    kept = [texted[i] for i in decision.kept]
    failed: list[str] = []
    degraded: list[dict[str, Any]] = []
    for o in outcomes:
        if o.status is _FAILED or o.status is _TIMEOUT:
            failed.append(o.name)
        if o.degradation_reason is not None:
            degraded.append({"provider_name": o.name, "reason": o.degradation_reason})
    return ProviderReport(
        blocks=[o.text for o in kept],  # type: ignore[misc]
        fired=[{"provider_name": o.name, "tokens": o.tokens} for o in kept],
        skipped=[o.name for o in outcomes if o.status is _SKIPPED_SIZE]
        + [texted[i].name for i in decision.skipped],
        failed=failed,
        degraded=degraded,
        outcomes=outcomes,
        budget=budget,
        used_tokens=decision.used,
        offered_tokens=sum(o.tokens for o in texted),
    )

"""Face one: LionAGI 0.36's ``ContextProviderRegistry`` and ``ProviderReport``
(sequential by default, caps then a greedy priority budget, ``stats``, writeback);
concurrency, timeouts, a deadline and the production features are options."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol, runtime_checkable

from ._adapters import provide_invoker, provider_name, run_context_from_branch
from ._breaker import Breakers, BreakerSettings, coerce_breakers
from ._exceptions import InvalidType
from ._gather import Observer, ProviderCall
from ._log import logger_for
from ._outcome import Outcome, Status
from ._pass import ContextPass, Sources, pass_knob, policy_knob
from ._policy import Policy, check_max_chars, check_number, check_seconds
from ._render import tag_block
from ._report import Report
from ._safe_text import read_attr
from ._stability import PrefixHistory, check_max_sessions, session_key
from ._tokens import TokenCounter
from ._types import Number
from ._views import ProviderReport

__all__ = ["ContextProvider", "ContextProviderRegistry", "ProviderReport"]

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


_FIRED, _FAILED, _TIMEOUT = Status.FIRED, Status.FAILED, Status.TIMEOUT
_STAT_KEYS = ("recall_turns", "blocks_injected", "failed", "degraded_turns",
              "writeback_records", "writeback_failed")


class ContextProviderRegistry:
    """An ordered list of context providers with priorities, caps and a total budget.

    ``budget`` (default 2000 tokens) bounds the text kept per pass. Providers run in
    order (LionAGI) unless ``concurrent=True``; ``timeout`` bounds each (seconds; per
    provider in ``register``), ``deadline`` the pass, ``limit`` how many run at once.
    ``counter``: a tiktoken encoding name or a ``str -> int`` callable. ``on_outcome``
    gets each outcome when known. ``max_chars`` (default 4,000,000): longer text is
    skipped uncounted.

    ``breaker``: ``True`` (default) a circuit breaker per provider, failures counted per
    caller where the provider reads the run context's user and tenant; ``False`` off;
    or a ``BreakerSettings``/``Breakers``. ``dedupe=True`` skips a block an earlier
    provider of the pass returned (``docs/dedupe.md``). Reports carry ``prefix_stable``
    and ``cache_break`` against the session's previous pass (the run context's session,
    else the branch; the latest ``max_sessions`` kept); ``digests=False``: off.
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
        # The calls and sources of a pass, built once per ``tagged`` and reused.
        self._calls: dict[bool, tuple[list[ProviderCall], Sources]] = {}
        self._pass = ContextPass(
            Policy(timeout, deadline, limit, counter, on_outcome, max_chars),
            concurrent=concurrent, dedupe=dedupe, digests=digests, face="lionagi",
            breakers=(Breakers(breaker) if isinstance(breaker, BreakerSettings)  # its own
                      else coerce_breakers(breaker)),
            baselines=PrefixHistory(check_max_sessions(max_sessions)))
        self.budget = budget
        self.stats: dict[str, int] = dict.fromkeys(_STAT_KEYS, 0)

    # -- settings, checked when set (kept on the pass) -----------------------------
    timeout = policy_knob("timeout", "Default per-provider timeout in seconds, or None.")
    deadline = policy_knob("deadline", "Deadline for a whole pass in seconds, or None.")
    limit = policy_knob("limit", "How many providers may run at once (concurrent), or None.")
    max_chars = policy_knob("max_chars", "Size limit of one provider's text in characters.")
    on_outcome = policy_knob("observer", "Called with each provider's outcome when known.")
    concurrent = pass_knob("concurrent", "Run the providers together (default: in order).")
    breakers = pass_knob("breakers", "The circuit breakers (a Breakers), or None: off.")
    dedupe = pass_knob("dedupe", "Keep one copy of a text several providers return.")
    digests = pass_knob("digests", "Digest blocks and report the cache break.")

    @property
    def policy(self) -> Policy:
        """The shared knobs (timeout, deadline, limit, counter, observer, size limit)."""
        return self._pass.policy

    @property
    def budget(self) -> Number:
        """Total tokens a pass may keep. Mutable; must be a number."""
        return self._pass.budget  # type: ignore[return-value]  # never None here

    @budget.setter
    def budget(self, value: Number) -> None:
        self._pass.budget = check_number(value, "budget", allow_none=False)

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
        """Append ``provider`` (no replacement by name), named ``name``, else a truthy
        ``provider.name``, else its class name. ``max_tokens`` caps its block (falsy: no
        cap; strict ``>``); higher ``priority`` survives a budget conflict; ``timeout``
        and ``max_chars`` override the registry's. ``volatile=True`` (``None``: the
        provider's own ``volatile`` attribute) renders its block after the stable ones.
        """
        priority = check_number(priority, "priority", allow_none=False)
        max_tokens = check_number(max_tokens, "max_tokens", allow_none=True)
        if name is not None and not isinstance(name, str):
            raise InvalidType(f"name must be a str or None, got {name!r}")
        timeout = check_seconds(timeout, "timeout")
        max_chars = check_max_chars(max_chars)
        if volatile is None:
            volatile = read_attr(provider, "volatile") is True
        if not isinstance(volatile, bool):
            raise InvalidType(f"volatile must be a bool, got {volatile!r}")
        self._entries.append(
            _Entry(provider, priority, max_tokens, provider_name(provider, name), timeout,
                   max_chars, volatile)
        )
        self._calls.clear()

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
        p, board = self._pass.policy, self.breakers
        new = ContextProviderRegistry(
            self.budget, concurrent=self.concurrent, timeout=p.timeout,
            deadline=p.deadline, limit=p.limit, counter=p.counter,
            on_outcome=p.observer, max_chars=p.max_chars,
            breaker=(Breakers(board.settings, clock=board.clock, max_sources=board.max_sources,
                              max_callers=board.max_callers) if board is not None else False),
            dedupe=self.dedupe, digests=self.digests,
            max_sessions=self._baselines.max_sessions,
        )
        new._entries = [replace(e) for e in self._entries]
        return new

    @property
    def _baselines(self) -> PrefixHistory:
        return self._pass.baselines  # type: ignore[return-value]  # always set here

    def skipped_report(self) -> ProviderReport:
        """The report of a pass that called nobody (a systemless branch)."""
        outcomes = tuple(
            Outcome(e.name, i, Status.SKIPPED, reason="branch has no system message",
                    priority=e.priority, max_tokens=e.max_tokens)
            for i, e in enumerate(self._entries))
        return ProviderReport(Report(outcomes, self.budget,
                                     skip_order=tuple(range(len(outcomes)))))

    async def gather(self, branch: Any, instruction: Any, *, tagged: bool = False
                     ) -> ProviderReport:
        """Run every provider's ``provide(branch, instruction)`` and select within budget.

        LionAGI counts each block's bare text; ``tagged=True`` (a branch that renders
        ``<context>`` tags) counts it as sent, tag and blank line included (``blocks``
        still hold the bare text).
        """
        entries = self._entries
        if not entries:
            return ProviderReport(Report())
        tagged, context_pass = bool(tagged), self._pass
        built = self._calls.get(tagged)
        if built is None:
            built = self._calls[tagged] = ([
                ProviderCall(e.name, e.provider, provide_invoker(e.provider),
                             partial(tag_block, e.name) if tagged else None, e.timeout,
                             e.priority, e.max_tokens, e.max_chars, False)
                for e in entries
            ], Sources(entries, lambda i: (entries[i].name, entries[i].priority,
                                           entries[i].max_tokens),
                       [e.volatile for e in entries]))
        calls, sources = built
        history = (context_pass.history(branch, getattr(branch, "messages", ()))
                   if getattr(branch, "dedupe_history", False) else None)
        report = await context_pass.run(
            calls, (branch, instruction), sources,
            context=partial(run_context_from_branch, branch),
            session=session_key(getattr(branch, "run_context", None), branch)
            if context_pass.digests else None, history=history)
        kept = failed = degraded = 0
        for o in report.outcomes:  # one walk for the stats (the realistic registry rows)
            status = o.status
            if status is _FIRED:
                kept += 1
            elif status is _FAILED or status is _TIMEOUT:
                failed += 1
            if o.degradation_reason is not None:
                degraded = 1
        stats = self.stats
        stats["recall_turns"] += kept > 0
        stats["blocks_injected"] += kept
        stats["failed"] += failed
        stats["degraded_turns"] += degraded
        return ProviderReport(report)

    async def gather_writeback(self, branch: Any, action_responses: list[Any]) -> None:
        """Call each provider's optional ``writeback(branch, action_responses)`` in order:
        an ``int`` return adds to ``stats["writeback_records"]``, an ``Exception`` to
        ``stats["writeback_failed"]`` (logged; the next hook still runs)."""
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

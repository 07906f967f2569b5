"""The pass: a :class:`ContextPass` runs a provider pass and owns what outlives it
(policy, budget, breakers, dedupe, baselines, history indexes); every face holds one.
:meth:`ContextPass.run` runs the stages ``Breakers.admit`` -> ``gather`` -> ``place``
-> ``skip_seen`` -> ``note_missing`` -> ``build_report`` (caps, budget, dedupe, digests,
cache break) -> baseline and spans. A stage that changes a row makes a new outcome;
gathered rows are never changed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from operator import attrgetter
from time import perf_counter, time_ns
from typing import Any

from . import telemetry
from ._breaker import OPEN, Breakers
from ._call import ProviderCall
from ._context import context_value
from ._dedupe import HistoryIndex, skip_seen, text_key, untag
from ._exceptions import LionctxError
from ._fair import FairLRU, tenant_user
from ._gather import gather
from ._log import logger_for
from ._outcome import Outcome, Status
from ._policy import Policy, check_number
from ._render import tag_block
from ._report import Report, build_report
from ._run import GENERIC_EMPTY
from ._scope import context_fields
from ._stability import Digests, PrefixHistory
from ._tokens import TokenCounter, resolve_counter
from ._types import Number
from ._weakid import WeakIdMap

__all__ = ["UNKEYED", "ContextPass", "Sources", "note_missing", "pass_knob", "policy_knob"]

logger = logger_for(__name__)

#: ``session=`` of a pass that keeps no baseline (its ``previous`` is given or none).
UNKEYED: Any = object()


def policy_knob(field: str, doc: str) -> Any:
    """A face's setting kept in its pass's policy (``owner._pass``), checked when set."""
    def put(owner: Any, value: Any) -> None:
        owner._pass.policy = owner._pass.policy.replace(**{field: value})
    return property(attrgetter(f"_pass.policy.{field}"), put, doc=doc)


def pass_knob(attr: str, doc: str) -> Any:
    """A face's setting kept on its pass (``owner._pass``)."""
    def put(owner: Any, value: Any) -> None:
        setattr(owner._pass, attr, value)
    return property(attrgetter(f"_pass.{attr}"), put, doc=doc)


class Sources:
    """A face's sources, one per call: ``keys`` (breaker keys: the provider or its
    entry), ``volatile`` flags, ``describe(i)`` (``(name, priority, cap)`` of a source
    its breaker kept out); ``held``: ``(board, its breakers of keys)``, kept while right."""

    __slots__ = ("describe", "held", "keys", "volatile")

    def __init__(self, keys: Sequence[Any], describe: Callable[[int], tuple[str, Any, Any]],
                 volatile: Sequence[bool] | None = None) -> None:
        self.keys = keys
        self.describe = describe
        self.volatile = volatile if volatile is not None and True in volatile else None
        self.held: tuple[Breakers, list[Any] | None] | None = None


#: Breakers.admit's answer: (breakers, positions called, {position: reason refused}, states)
_Gate = tuple[Any, Any, dict[int, str], "list[str | None] | None"]
_ALL: _Gate = ((), None, {}, None)  # with no breakers


def _context(read: Callable[[], Any] | None) -> Callable[[], Any]:
    """The pass's run context, read once when a stage first asks (the registry rows)."""
    box: list[Any] = []

    def ctx() -> Any:
        if not box:
            try:
                box.append(read() if read is not None else None)
            except Exception:
                logger.warning("could not read the run context of a pass", exc_info=True)
                box.append(None)
        return box[0]
    return ctx


class ContextPass:
    """The policy and production features of a face's passes; :meth:`run` is one pass.
    ``face`` names it in spans; ``note_missing``: an ``empty`` row of a provider that
    reads an unset run-context field says so."""

    __slots__ = ("_budget", "_counter", "_lock", "_owners", "_sessions", "baselines",
                 "breakers", "concurrent", "dedupe", "digests", "face", "note_missing",
                 "policy")

    def __init__(self, policy: Policy | None = None, *, budget: Number | None = None,
                 concurrent: bool = False, breakers: Breakers | None = None,
                 dedupe: bool = False, digests: bool = True,
                 baselines: PrefixHistory | None = None, face: str = "agentium",
                 note_missing: bool = False) -> None:
        self.policy = policy if policy is not None else Policy()
        self.budget = budget
        self.concurrent = bool(concurrent)
        self.breakers = breakers
        self.dedupe = bool(dedupe)
        self.digests = bool(digests)
        self.baselines = baselines
        self.face = face
        self.note_missing = note_missing
        self._counter: tuple[Any, TokenCounter] | None = None
        self._lock = threading.Lock()
        # each conversation's HistoryIndex: by its owner (weakly), else by key
        self._owners: WeakIdMap[HistoryIndex] = WeakIdMap()
        self._sessions: FairLRU[Hashable, HistoryIndex] = FairLRU(1024, tenant_user)

    @property
    def budget(self) -> Number | None:
        """Total tokens a pass may keep (``None``: no budget)."""
        return self._budget

    @budget.setter
    def budget(self, value: Number | None) -> None:
        self._budget = check_number(value, "budget", allow_none=True)

    def counter(self) -> TokenCounter:
        """The policy's token counter, resolved once per counter setting."""
        cached, wanted = self._counter, self.policy.counter
        if cached is None or cached[0] is not wanted:
            cached = self._counter = (wanted, resolve_counter(wanted))
        return cached[1]

    def history(self, owner: Any, messages: Sequence[Any]) -> HistoryIndex:
        """The history index of ``owner``'s conversation (held weakly, else by key),
        updated with ``messages`` (only new ones are read)."""
        index = self._owners.setdefault(owner, HistoryIndex)
        if index is None:  # not weakly referenceable: kept by key, least recent out
            with self._lock:  # fair per tenant and user, as the baselines
                self._sessions.maxsize = (self.baselines.max_sessions
                                          if self.baselines is not None else 1024)
                try:
                    index = self._sessions.get(owner)  # an empty index is falsy
                    if index is None:
                        self._sessions.put(owner, index := HistoryIndex())
                except TypeError:  # unhashable too: a fresh, bounded index
                    index = HistoryIndex()
        index.update(messages)
        return index

    async def run(self, calls: Sequence[ProviderCall], args: tuple[Any, ...], sources: Sources,
                  *, context: Callable[[], Any] | None = None, session: Any = UNKEYED,
                  previous: Digests | None = None, history: HistoryIndex | None = None,
                  framed: bool = False) -> Report:
        """One pass over ``calls`` (``invoke(*args)`` each). ``session``: the key of the
        baseline in :attr:`baselines` (else ``previous``); ``framed``: rows hold tag
        blocks (the agentium face)."""
        started = perf_counter()
        ctx = _context(context)
        keyed = session is not UNKEYED and self.baselines is not None and self.digests
        traced = telemetry.live()
        started_ns = time_ns() if traced else 0
        arrived: dict[int, int] | None = {} if traced else None
        # The stages inline (the registry rows' fixed cost); the breakers pick who is called
        board, policy, timing = self.breakers, self.policy, {"tokenizer_load_ms": 0.0}
        gate = _ALL
        if board is not None:
            held = sources.held  # a registration's breakers, looked up once: the features row
            if held is None or held[0] is not board or held[1] is None:
                held = sources.held = (board, board.held(sources.keys))
            gate = board.admit(sources.keys, ctx, held[1])
        outcomes = await gather(
            calls if not gate[2] else [calls[i] for i in gate[1]],
            counter=self.counter(), concurrent=self.concurrent, timeout=policy.timeout,
            deadline=policy.deadline, limit=policy.limit,
            observe=policy.observer if arrived is None else _noting(arrived, policy.observer),
            budget=self._budget, max_chars=policy.max_chars, timing=timing, args=args,
            # digests while counting only when a stage compares them now (else on demand)
            digests=self.digests and (keyed or previous is not None))
        outcomes = self.place(outcomes, gate, sources, arrived)
        if board is not None:
            board.record(gate[0], outcomes, ctx)
        if history is not None:
            outcomes = skip_seen(outcomes, history, _untagged if framed else None)
        if self.note_missing:
            outcomes = note_missing(outcomes, sources.keys, ctx())
        # -> admission -> report (digests now when a stage or a span reads them, else later)
        eager = keyed or previous is not None or traced
        report = build_report(
            outcomes, self._budget, previous=previous, digests=self.digests and (eager or None),
            framed=framed, started=started, tokenizer_load_ms=timing["tokenizer_load_ms"],
            dedupe=(_untagged_key if framed else _text_key) if self.dedupe else None,
            # the session's baseline replaced by this pass's, the one it replaces compared
            baseline=partial(self.baselines.swap, session) if keyed else None)  # type: ignore[union-attr]
        if traced:
            telemetry.record_report(self.face, report, started_ns=started_ns,
                                    concurrent=self.concurrent)
        return report

    @staticmethod
    def place(called: list[Outcome], gate: _Gate, sources: Sources,
              arrived: dict[int, int] | None) -> list[Outcome]:
        """Every source's row in source order (refused ones ``skipped``), with its
        position, circuit state, volatile flag and (traced) start time."""
        _, allowed, refused, states = gate
        allowed, volatile = allowed if refused else None, sources.volatile  # None: all called
        if allowed is None and states is None and volatile is None and not arrived:
            return called
        arrived = arrived or {}
        rows: list[Outcome | None] = [None] * len(sources.keys)
        for k, o in enumerate(called):
            pos = k if allowed is None else allowed[k]
            changes: dict[str, Any] = {}
            if o.index != pos:
                changes["index"] = pos
            state = None if states is None else states[pos]
            if state is not None and o.circuit is None:
                changes["circuit"] = state
            if volatile is not None and volatile[pos] and not o.volatile:
                changes["volatile"] = True
            stamp = arrived.get(k)
            if stamp is not None and o.started_ns is None:
                changes["started_ns"] = stamp
            rows[pos] = o.replace(**changes) if changes else o
        for i, reason in refused.items():
            name, priority, cap = sources.describe(i)
            rows[i] = Outcome(name, i, Status.SKIPPED, reason=reason, priority=priority,
                              max_tokens=cap, circuit=OPEN,
                              volatile=volatile is not None and volatile[i])
        return rows  # type: ignore[return-value]  # every position is filled


def note_missing(outcomes: list[Outcome], providers: Sequence[Any], ctx: Any) -> list[Outcome]:
    """Each ``empty`` row of a provider reading an unset run-context field says so."""
    rows = outcomes
    for i, (outcome, provider) in enumerate(zip(outcomes, providers, strict=False)):
        if outcome.status is not Status.EMPTY:
            continue
        try:
            fields = context_fields(provider)
        except LionctxError:
            continue
        missing = [f for f in fields if context_value(ctx, f) is None]
        if not missing:
            continue
        note = f"no {', '.join(missing)} in the run context"
        if rows is outcomes:
            rows = list(outcomes)
        rows[i] = outcome.replace(reason=note if outcome.reason in (None, "", *GENERIC_EMPTY)
                                  else f"{outcome.reason}; {note}")
    return rows


def _noting(arrived: dict[int, int],
            observe: Callable[[Outcome], None] | None) -> Callable[[Outcome], None]:
    """The observer of a traced pass: notes when each outcome's call started."""
    def noted(o: Outcome) -> None:
        arrived[o.index] = time_ns() - int(o.duration_ms * 1e6)
        if observe is not None:
            observe(o)
    return noted


def _text_key(o: Outcome) -> str:
    return text_key(o.text or "")


def _untagged(o: Outcome) -> str:
    return untag(o.name, o.text or "", tag_block)


def _untagged_key(o: Outcome) -> str:
    return text_key(_untagged(o))

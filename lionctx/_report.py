"""The one report of a pass, and the two faces' views of it.

A pass ends in one :class:`Report`: every provider's final
:class:`~lionctx._outcome.Outcome` in source order, the budget, the tokens kept and
offered, the timing, the digests of the injected blocks and where the prompt-cache
prefix broke. :func:`build_report` makes it from the gathered outcomes: admission
decides, and a row whose decision changes becomes a new outcome. The gathered rows
(which an ``on_outcome`` observer may keep) are never changed.

Two thin views read it, each with its face's public shape:

* :class:`ProviderReport` (LionAGI): ``blocks``, ``fired``, ``skipped``, ``failed``,
  ``degraded`` and the stats;
* :class:`Resolution` (agentium): the ``<context>`` string and its outcomes.

Both expose the report as ``.report``. Text is rendered on demand by the one
renderer (:mod:`lionctx._render`): as tags, or as LionAGI's fold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Generic, Literal, TypeVar, overload

from ._admission import admit_columns
from ._exceptions import InvalidValue
from ._outcome import Outcome, Status
from ._render import kept_in_order, render_context, render_lionagi
from ._stability import CacheBreak, Digests, compare, digest
from ._types import Number

__all__ = ["ProviderReport", "Report", "Resolution", "build_report"]

_FIRED = Status.FIRED
_SIZE = Status.SKIPPED_SIZE


@dataclass(frozen=True, slots=True)
class Report:
    """What one pass did: the one report type both faces view."""

    outcomes: tuple[Outcome, ...] = ()
    """One row per provider, in source (registration or list) order."""
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
    digests: Digests = ()
    """``(name, digest)`` of each injected block, in rendering order (empty when
    digests are off)."""
    prefix_stable: bool | None = None
    """The injected blocks are byte-identical to the previous pass's (``None``
    without a previous pass)."""
    cache_break: CacheBreak | None = None
    """The first block that differs from the previous pass's, ``None`` when none does."""
    skip_order: tuple[int, ...] = ()
    """Positions of the rows LionAGI lists as ``skipped``, in its order: size
    skips, cap skips, then budget skips in the order admission considered them."""
    framed: bool = False
    """The outcomes hold their blocks already framed in ``<context>`` tags (the
    agentium face counts and keeps the framed text)."""

    @property
    def kept(self) -> list[Outcome]:
        """The kept (``fired``) rows, in source order."""
        return [o for o in self.outcomes if o.status is _FIRED]

    def render(self, style: Literal["tags", "lionagi"] = "tags", *, system: str = "",
               guidance: str = "") -> str:
        """The text this pass injects.

        ``"tags"``: the kept blocks in ``<context>`` tags, stable sources first,
        joined by a blank line. ``"lionagi"``: LionAGI's fold, ``system +
        "\\n".join(blocks) + guidance``, blocks in registration order.
        """
        if style == "tags":
            return render_context(self.outcomes, framed=self.framed)
        if style == "lionagi":
            return render_lionagi(system, (o.text or "" for o in self.kept), guidance)
        raise InvalidValue(f"style must be 'tags' or 'lionagi', got {style!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # by value (a frozen slots dataclass does not unpickle on Python 3.10)
        return (Report, tuple(getattr(self, f.name) for f in dataclasses.fields(self)))

    def to_dict(self, *, include_text: bool = False) -> dict[str, Any]:
        """A JSON-ready view of every figure (the outcomes' text only when asked for)."""
        brk = self.cache_break
        return {
            "budget": self.budget,
            "used_tokens": self.used_tokens,
            "offered_tokens": self.offered_tokens,
            "duration_ms": self.duration_ms,
            "tokenizer_load_ms": self.tokenizer_load_ms,
            "outcomes": [o.to_dict(include_text=include_text) for o in self.outcomes],
            "digests": [list(d) for d in self.digests],
            "prefix_stable": self.prefix_stable,
            "cache_break": brk.to_dict() if brk is not None else None,
        }


_EMPTY = Report()


def _counted(o: Outcome) -> str:
    return f"{o.tokens} tokens" if o.exact else f"at least {o.tokens} tokens (counting stopped)"


def build_report(outcomes: Sequence[Outcome], budget: Number | None, *,
                 previous: Digests | None = None, digests: bool = True,
                 framed: bool = False, started: float | None = None,
                 tokenizer_load_ms: float = 0.0) -> Report:
    """Admission over one pass's gathered ``outcomes``, then the report.

    Every ``fired`` row goes through :func:`~lionctx._admission.admit_columns`
    (caps, then ``budget``); a row it skips is a new outcome
    (``skipped_cap``/``skipped_budget`` with the reason). With ``digests``, each
    kept block has its digest and the report says how its blocks compare with
    ``previous`` (the previous pass's digests). ``started`` (a ``perf_counter``
    reading) gives ``duration_ms``, less ``tokenizer_load_ms``. ``outcomes`` is
    left as it is.
    """
    rows = list(outcomes)
    texted: list[int] = []
    tokens: list[int] = []
    priorities: list[Number] = []
    caps: list[Number | None] = []
    sized: list[int] = []
    for i, o in enumerate(rows):
        status = o.status
        if status is _FIRED:
            texted.append(i)
            tokens.append(o.tokens)
            priorities.append(o.priority)
            caps.append(o.max_tokens)
        elif status is _SIZE:
            sized.append(i)
    decision = admit_columns(tokens, priorities, caps, budget)
    for k in decision.skipped_cap:
        i = texted[k]
        o = rows[i]
        rows[i] = o.replace(status=Status.SKIPPED_CAP, digest=None,
                            reason=f"{_counted(o)} over its cap of {o.max_tokens:g}")
    for k, room in zip(decision.skipped_budget, decision.room, strict=False):
        i = texted[k]
        o = rows[i]
        rows[i] = o.replace(
            status=Status.SKIPPED_BUDGET, digest=None,
            reason=f"{_counted(o)} did not fit the {room:g} left of budget {budget:g}")
    current: Digests = ()
    brk: CacheBreak | None = None
    stable: bool | None = None
    if digests:
        for k in decision.kept:
            o = rows[texted[k]]
            if o.digest is None:  # gather digests what it counts; a row made elsewhere
                rows[texted[k]] = o.replace(digest=digest(o.text or ""))
        current = tuple((o.name, o.digest or "") for o in kept_in_order(rows))
        brk = compare(previous, current)
        stable = None if previous is None else brk is None
    duration = 0.0 if started is None else (perf_counter() - started) * 1000.0 - tokenizer_load_ms
    return Report(tuple(rows), budget, decision.used, sum(tokens), duration, tokenizer_load_ms,
                  current, stable, brk, (*sized, *(texted[k] for k in decision.skipped)),
                  framed)


# -- the views ------------------------------------------------------------------------

T = TypeVar("T")


class _Shown(Generic[T]):
    """A view attribute read from its report.

    Assigning it is refused like any field of a frozen dataclass; code that set
    one through ``object.__setattr__`` (as on the frozen dataclasses these views
    replace) swaps in a new report with that value: no report is ever changed.
    """

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Shown[T]: ...
    @overload
    def __get__(self, obj: _View, owner: type | None = None) -> T: ...
    def __get__(self, obj: _View | None, owner: type | None = None) -> T | _Shown[T]:
        if obj is None:
            return self
        value: T = getattr(obj.report, self.name)
        return value

    def __set__(self, obj: _View, value: T) -> None:
        changes: dict[str, Any] = {self.name: value}
        object.__setattr__(obj, "report", dataclasses.replace(obj.report, **changes))


class _View:
    """What both views share: the report, frozen attributes, equality, pickling."""

    __slots__ = ("__weakref__", "report")
    report: Report
    _FIELDS: tuple[str, ...] = ()
    """The names shown by ``repr``, in the order of the dataclass each view was."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def _state(self) -> tuple[Any, ...]:
        return tuple(getattr(self, s) for s in type(self).__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _View)
        return self.report == other.report and self._state() == other._state()

    __hash__ = None  # type: ignore[assignment]  # holds lists, as the dataclasses did

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.report, self._state()))


def _restore(cls: type[_View], report: Report, state: tuple[Any, ...]) -> _View:
    view = object.__new__(cls)
    object.__setattr__(view, "report", report)
    for name, value in zip(cls.__slots__, state, strict=True):
        object.__setattr__(view, name, value)
    return view


class ProviderReport(_View):
    """What one provider pass did: LionAGI's report, a view of one :class:`Report`.

    The first five attributes are LionAGI's: ``blocks[i]`` and ``fired[i]``
    describe the same kept block, in registration order; ``fired`` rows are
    ``{"provider_name", "tokens"}``; ``skipped`` lists cap skips then budget skips;
    ``failed`` lists providers that raised, returned a non-string or timed out;
    ``degraded`` rows are ``{"provider_name", "reason"}``. The report is frozen, its
    lists are the caller's (new ones every pass). ``report`` is the underlying
    :class:`Report`.
    """

    __slots__ = ("blocks", "fired", "skipped", "failed", "degraded", "outcomes")
    blocks: list[str]
    fired: list[dict[str, Any]]
    skipped: list[str]
    failed: list[str]
    degraded: list[dict[str, Any]]
    outcomes: list[Outcome]
    """One row per registered provider, in registration order."""

    _FIELDS = ("blocks", "fired", "skipped", "failed", "degraded", "outcomes", "budget",
               "used_tokens", "offered_tokens", "duration_ms", "tokenizer_load_ms",
               "cache_break", "prefix_stable")

    budget: _Shown[Number | None] = _Shown("The pass's token budget.")
    used_tokens: _Shown[int] = _Shown("Tokens of the kept blocks.")
    offered_tokens: _Shown[int] = _Shown(
        "Tokens of every block providers returned, kept or not.")
    duration_ms: _Shown[float] = _Shown(
        "Wall time of the pass, not counting the one-time tokenizer load.")
    tokenizer_load_ms: _Shown[float] = _Shown(
        "Time spent loading the token encoding before any provider started (the first "
        "pass in a process only; 0 afterwards).")
    cache_break: _Shown[CacheBreak | None] = _Shown(
        "The first block that differs from the previous pass's (a "
        ":class:`~lionctx._stability.CacheBreak`), ``None`` when none does.")
    prefix_stable: _Shown[bool | None] = _Shown(
        "The injected blocks are byte-identical to the previous pass's (``None`` on the "
        "first pass).")

    def __init__(self, report: Report | None = None) -> None:
        report = _EMPTY if report is None else report
        outcomes = list(report.outcomes)
        blocks: list[str] = []
        fired: list[dict[str, Any]] = []
        failed: list[str] = []
        degraded: list[dict[str, Any]] = []
        for o in outcomes:
            status = o.status
            if status is _FIRED:
                blocks.append(o.text or "")
                fired.append({"provider_name": o.name, "tokens": o.tokens})
            elif status is Status.FAILED or status is Status.TIMEOUT:
                failed.append(o.name)
            if o.degradation_reason is not None:
                degraded.append({"provider_name": o.name, "reason": o.degradation_reason})
        set_ = object.__setattr__
        set_(self, "report", report)
        set_(self, "blocks", blocks)
        set_(self, "fired", fired)
        set_(self, "skipped", [outcomes[i].name for i in report.skip_order])
        set_(self, "failed", failed)
        set_(self, "degraded", degraded)
        set_(self, "outcomes", outcomes)

    @property
    def names(self) -> list[str]:
        """Names of the kept blocks, in order."""
        return [row["provider_name"] for row in self.fired]

    def to_dict(self, *, include_text: bool = False) -> dict[str, Any]:
        """A JSON-ready view of the report."""
        brk = self.cache_break
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
            "cache_break": brk.to_dict() if brk is not None else None,
            **({"blocks": list(self.blocks)} if include_text else {}),
        }


class Resolution(_View):
    """The merged context string and what happened to each provider: agentium's
    result, a view of one :class:`Report` (``report``)."""

    __slots__ = ("text", "outcomes")
    text: str
    """The ``<context>`` blocks, stable sources first, joined by a blank line."""
    outcomes: list[Outcome]
    """One row per provider, in list order."""

    _FIELDS = ("text", "outcomes", "budget", "used_tokens", "duration_ms",
               "tokenizer_load_ms", "digests", "cache_break", "prefix_stable")

    budget: _Shown[Number | None] = _Shown("The token budget, or ``None``.")
    used_tokens: _Shown[int] = _Shown("Tokens of the blocks in ``text``.")
    duration_ms: _Shown[float] = _Shown(
        "Wall time of the pass, not counting the one-time tokenizer load.")
    tokenizer_load_ms: _Shown[float] = _Shown(
        "Time spent loading the token encoding (the first pass in a process only).")
    digests: _Shown[Digests] = _Shown(
        "``(name, digest)`` of each block in ``text``, in order: pass this resolution "
        "as the next turn's ``previous=`` to learn whether the prefix stayed stable.")
    cache_break: _Shown[CacheBreak | None] = _Shown(
        "The first block that differs from ``previous``'s, ``None`` when none does.")
    prefix_stable: _Shown[bool | None] = _Shown(
        "``text`` is byte-identical to ``previous``'s (``None`` without ``previous``).")

    def __init__(self, report: Report) -> None:
        set_ = object.__setattr__
        set_(self, "report", report)
        set_(self, "text", report.render())
        set_(self, "outcomes", list(report.outcomes))

    def __str__(self) -> str:
        return self.text

    @property
    def fired(self) -> list[str]:
        """Names whose blocks are in ``text``, in order."""
        return [o.name for o in self.outcomes if o.status is _FIRED]

    def to_dict(self, *, include_text: bool = False) -> dict[str, Any]:
        """A JSON-ready view."""
        brk = self.cache_break
        return {
            "text": self.text,
            "budget": self.budget,
            "used_tokens": self.used_tokens,
            "duration_ms": self.duration_ms,
            "tokenizer_load_ms": self.tokenizer_load_ms,
            "outcomes": [o.to_dict(include_text=include_text) for o in self.outcomes],
            "prefix_stable": self.prefix_stable,
            "cache_break": brk.to_dict() if brk is not None else None,
        }

"""The two faces' views of one :class:`~lionctx._report.Report`.

* :class:`ProviderReport` (LionAGI): ``blocks``, ``fired``, ``skipped``, ``failed``,
  ``degraded`` and the stats;
* :class:`Resolution` (agentium): the ``<context>`` string and its outcomes.

Both expose the report as ``.report``. Each view is built from a report
(``report=``) or, as the frozen dataclasses they were, from their old fields
(positional or keyword); those fields then make the report. To :mod:`dataclasses`
each still is that frozen dataclass (``fields``, ``asdict``, ``replace``,
``is_dataclass``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, overload

from ._exceptions import InvalidType
from ._outcome import Outcome, Status
from ._render import kept_in_order
from ._report import Report
from ._stability import CacheBreak, Digests
from ._types import Number

__all__ = ["ProviderReport", "Resolution"]

_FIRED = Status.FIRED
_SIZE = Status.SKIPPED_SIZE


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
    """What both views share: the report, frozen attributes, equality, pickling.

    Each view keeps the dataclass face it had before it became a view: its class
    carries the ``__dataclass_fields__`` and ``__dataclass_params__`` of a frozen
    dataclass with the old fields (:func:`_face`), so :func:`dataclasses.fields`,
    :func:`~dataclasses.asdict`, :func:`~dataclasses.replace` and
    :func:`~dataclasses.is_dataclass` work on it, and equality compares those
    fields in order, as the dataclass's did.
    """

    __slots__ = ("__weakref__", "report")
    report: Report
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    """The old dataclass's field names, in order (``repr``, equality, the constructor)."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def _state(self) -> tuple[Any, ...]:
        return tuple(getattr(self, s) for s in type(self).__slots__)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _View)
        return self._values() == other._values()

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


def _face(view: type[_View], shape: type) -> None:
    """Give ``view`` the dataclass metadata of the frozen dataclass ``shape``."""
    for name in ("__dataclass_fields__", "__dataclass_params__"):
        setattr(view, name, getattr(shape, name))
    setattr(view, "__match_args__", view._FIELDS)  # noqa: B010  # mypy: a final name
    assert tuple(f.name for f in dataclasses.fields(shape)) == view._FIELDS


_UNSET: Any = object()  # a field the caller did not give


def _given(value: Any, default: Any) -> Any:
    return default if value is _UNSET else value


def _report_arg(report: object, given: dict[str, Any], view: str) -> Report:
    """The ``report=`` argument, checked: a Report, and no field beside it."""
    if not isinstance(report, Report):
        raise InvalidType(f"{view}(report=...) takes a Report, got {report!r}")
    extra = [name for name, value in given.items() if value is not _UNSET]
    if extra:
        raise InvalidType(f"{view}() takes report= or the fields, not both; got report= "
                        f"and {', '.join(extra)}")
    return report


def _outcome_rows(outcomes: Any, view: str) -> tuple[Outcome, ...]:
    rows = tuple(outcomes)
    for o in rows:
        if not isinstance(o, Outcome):
            raise InvalidType(f"{view}(outcomes=...) takes Outcome rows, got {o!r}")
    return rows


def _kept_digests(rows: Sequence[Outcome]) -> Digests:
    """What build_report records when digests are on: every kept row's digest, in
    rendering order (empty when any kept row has none: digests were off)."""
    kept = kept_in_order(rows)
    if any(o.digest is None for o in kept):
        return ()
    return tuple((o.name, o.digest or "") for o in kept)


_SKIPS = (Status.SKIPPED_SIZE, Status.SKIPPED_CAP, Status.SKIPPED_BUDGET)


def _skip_order_of(rows: Sequence[Outcome], names: Sequence[str]) -> tuple[int, ...]:
    """Positions of the size, cap and budget skips LionAGI's ``skipped`` names, in
    its order (a name without such a row has no position)."""
    free: dict[str, list[int]] = {}
    for i, o in enumerate(rows):
        if o.status in _SKIPS:
            free.setdefault(o.name, []).append(i)
    order: list[int] = []
    for name in names:
        spots = free.get(name)
        if spots:
            order.append(spots.pop(0))
    return tuple(order)


def _skip_order_from_rows(rows: Sequence[Outcome]) -> tuple[int, ...]:
    """build_report's skip order, read back from the rows: size skips, cap skips,
    then budget skips in the order admission considered them (priority, then
    source order)."""
    size = [i for i, o in enumerate(rows) if o.status is _SIZE]
    cap = [i for i, o in enumerate(rows) if o.status is Status.SKIPPED_CAP]
    budget = [i for i, o in enumerate(rows) if o.status is Status.SKIPPED_BUDGET]
    if len({rows[i].priority for i in budget}) > 1:
        budget.sort(key=lambda i: -rows[i].priority)
    return (*size, *cap, *budget)


def _offered(rows: Sequence[Outcome]) -> int:
    """Tokens of every block that reached admission (kept, or skipped by it)."""
    return sum(o.tokens for o in rows
               if o.status is _FIRED or o.status is Status.SKIPPED_CAP
               or o.status is Status.SKIPPED_BUDGET)


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

    @overload
    def __init__(self, report: Report, /) -> None: ...
    @overload
    def __init__(self, blocks: list[str] | None = None,
                 fired: list[dict[str, Any]] | None = None, skipped: list[str] | None = None,
                 failed: list[str] | None = None, degraded: list[dict[str, Any]] | None = None,
                 outcomes: list[Outcome] | None = None, budget: Number | None = None,
                 used_tokens: int = 0, offered_tokens: int = 0, duration_ms: float = 0.0,
                 tokenizer_load_ms: float = 0.0, cache_break: CacheBreak | None = None,
                 prefix_stable: bool | None = None, *, report: Report | None = None) -> None: ...
    def __init__(self, blocks: Any = _UNSET, fired: Any = _UNSET, skipped: Any = _UNSET,
                 failed: Any = _UNSET, degraded: Any = _UNSET, outcomes: Any = _UNSET,
                 budget: Any = _UNSET, used_tokens: Any = _UNSET, offered_tokens: Any = _UNSET,
                 duration_ms: Any = _UNSET, tokenizer_load_ms: Any = _UNSET,
                 cache_break: Any = _UNSET, prefix_stable: Any = _UNSET, *,
                 report: Report | None = None) -> None:
        """The view of ``report``, or a report made from LionAGI's fields.

        ``ProviderReport(report)`` / ``ProviderReport(report=report)`` reads every
        field from the :class:`Report`. Otherwise the fields are the old dataclass's,
        positional in this order or by keyword, each defaulting to empty: the lists
        given are the lists shown (as given, not copied), and ``report`` is a
        :class:`Report` of the given ``outcomes``, budget, tokens, timing and cache
        figures.
        """
        given: tuple[Any, ...] = (
            blocks, fired, skipped, failed, degraded, outcomes, budget, used_tokens,
            offered_tokens, duration_ms, tokenizer_load_ms, cache_break, prefix_stable)
        names: tuple[str, ...] = self._FIELDS
        if isinstance(blocks, Report) and report is None:  # ProviderReport(report)
            report, given, names = blocks, given[1:], names[1:]
        if report is not None:
            if report.__class__ is not Report or any(v is not _UNSET for v in given):
                _report_arg(report, dict(zip(names, given, strict=True)), "ProviderReport")
            self._read(report)
            return
        set_ = object.__setattr__
        rows = _outcome_rows(() if outcomes is _UNSET or outcomes is None else outcomes,
                             "ProviderReport")
        skipped = [] if skipped is _UNSET or skipped is None else skipped
        set_(self, "report", Report(
            rows, _given(budget, None), _given(used_tokens, 0), _given(offered_tokens, 0),
            _given(duration_ms, 0.0), _given(tokenizer_load_ms, 0.0), _kept_digests(rows),
            _given(prefix_stable, None), _given(cache_break, None),
            _skip_order_of(rows, skipped)))
        set_(self, "blocks", [] if blocks is _UNSET or blocks is None else blocks)
        set_(self, "fired", [] if fired is _UNSET or fired is None else fired)
        set_(self, "skipped", skipped)
        set_(self, "failed", [] if failed is _UNSET or failed is None else failed)
        set_(self, "degraded", [] if degraded is _UNSET or degraded is None else degraded)
        set_(self, "outcomes", outcomes if isinstance(outcomes, list) else list(rows))

    def _read(self, report: Report) -> None:
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

    @overload
    def __init__(self, report: Report, /) -> None: ...
    @overload
    def __init__(self, text: str, outcomes: list[Outcome] | None = None,
                 budget: Number | None = None, used_tokens: int = 0,
                 duration_ms: float = 0.0, tokenizer_load_ms: float = 0.0,
                 digests: Digests = (), cache_break: CacheBreak | None = None,
                 prefix_stable: bool | None = None) -> None: ...
    @overload
    def __init__(self, *, report: Report) -> None: ...
    def __init__(self, text: Any = _UNSET, outcomes: Any = _UNSET, budget: Any = _UNSET,
                 used_tokens: Any = _UNSET, duration_ms: Any = _UNSET,
                 tokenizer_load_ms: Any = _UNSET, digests: Any = _UNSET,
                 cache_break: Any = _UNSET, prefix_stable: Any = _UNSET, *,
                 report: Report | None = None) -> None:
        """The view of ``report``, or a report made from the old dataclass's fields.

        ``Resolution(report)`` / ``Resolution(report=report)`` reads every field from
        the :class:`Report` (``text`` is its rendering). Otherwise ``text`` is
        required and the other fields default to empty, positional in this order or
        by keyword: ``text`` and ``outcomes`` are shown as given, and ``report`` is a
        :class:`Report` of the given outcomes (their text framed in ``<context>``
        tags, as :func:`~lionctx.resolve_context` keeps it), budget, tokens, timing,
        digests and cache figures.
        """
        given: tuple[Any, ...] = (text, outcomes, budget, used_tokens, duration_ms,
                                  tokenizer_load_ms, digests, cache_break, prefix_stable)
        names: tuple[str, ...] = self._FIELDS
        if isinstance(text, Report) and report is None:  # Resolution(report)
            report, given, names = text, given[1:], names[1:]
        set_ = object.__setattr__
        if report is not None:
            if report.__class__ is not Report or any(v is not _UNSET for v in given):
                _report_arg(report, dict(zip(names, given, strict=True)), "Resolution")
            set_(self, "report", report)
            set_(self, "text", report.render())
            set_(self, "outcomes", list(report.outcomes))
            return
        if text is _UNSET:
            raise InvalidType("Resolution() needs its text (or report=)")
        if not isinstance(text, str):
            raise InvalidType(f"Resolution(text=...) takes a str, got {text!r}")
        rows = _outcome_rows(() if outcomes is _UNSET or outcomes is None else outcomes,
                             "Resolution")
        pairs: Digests = () if digests is _UNSET or digests is None else tuple(
            (str(name), str(value)) for name, value in digests)
        set_(self, "report", Report(
            rows, _given(budget, None), _given(used_tokens, 0), _offered(rows),
            _given(duration_ms, 0.0), _given(tokenizer_load_ms, 0.0), pairs,
            _given(prefix_stable, None), _given(cache_break, None),
            _skip_order_from_rows(rows), framed=True))
        set_(self, "text", text)
        set_(self, "outcomes", outcomes if isinstance(outcomes, list) else list(rows))

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


# -- the dataclass face of each view (what the frozen dataclasses were) ---------------

@dataclass(frozen=True)
class _ProviderReportShape:
    blocks: list[str] = dataclasses.field(default_factory=list)
    fired: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)
    degraded: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    outcomes: list[Outcome] = dataclasses.field(default_factory=list)
    budget: Number | None = None
    used_tokens: int = 0
    offered_tokens: int = 0
    duration_ms: float = 0.0
    tokenizer_load_ms: float = 0.0
    cache_break: CacheBreak | None = None
    prefix_stable: bool | None = None


@dataclass(frozen=True)
class _ResolutionShape:
    text: str
    outcomes: list[Outcome] = dataclasses.field(default_factory=list)
    budget: Number | None = None
    used_tokens: int = 0
    duration_ms: float = 0.0
    tokenizer_load_ms: float = 0.0
    digests: Digests = ()
    cache_break: CacheBreak | None = None
    prefix_stable: bool | None = None


_face(ProviderReport, _ProviderReportShape)
_face(Resolution, _ResolutionShape)

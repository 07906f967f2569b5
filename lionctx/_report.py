"""The one report of a pass (:class:`Report`) and :func:`build_report`, which runs
admission over the gathered rows to make it; the faces view it (:mod:`lionctx._views`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from time import perf_counter
from typing import Any, Literal

from ._admission import admit_columns
from ._exceptions import InvalidValue
from ._outcome import Outcome, Status
from ._render import kept_in_order, render_context, render_lionagi
from ._stability import CacheBreak, Digests, Pairs, compare, digest, fingerprints
from ._types import Number

__all__ = ["Report", "build_report"]

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
    """Tokens of every block returned, kept or not (a dedupe duplicate not again)."""
    duration_ms: float = 0.0
    """Wall time of the pass, not counting the one-time tokenizer load."""
    tokenizer_load_ms: float = 0.0
    """Time spent loading the token encoding (the first pass in a process only)."""
    _digests: Digests | None = field(default=(), repr=False)
    # the digests; None: made when first read (no stage of the pass compared them)
    prefix_stable: bool | None = None
    """The injected blocks equal the previous pass's byte for byte (``None``: no previous)."""
    cache_break: CacheBreak | None = None
    """The first block that differs from the previous pass's, ``None`` when none does."""
    skip_order: tuple[int, ...] = ()
    """Rows LionAGI lists as ``skipped``, in its order (size, cap, then budget skips as met)."""
    framed: bool = False
    """The outcomes hold their blocks framed in ``<context>`` tags (agentium face)."""

    @property
    def digests(self) -> Digests:
        """``(name, digest)`` of each injected block, in rendering order."""
        found = self._digests
        if found is None:
            found = tuple((o.name, o.digest or digest(o.text or ""))
                          for o in kept_in_order(self.outcomes))
            object.__setattr__(self, "_digests", found)
        return found

    @property
    def kept(self) -> list[Outcome]:
        """The kept (``fired``) rows, in source order."""
        return [o for o in self.outcomes if o.status is _FIRED]

    def render(self, style: Literal["tags", "lionagi"] = "tags", *, system: str = "",
               guidance: str = "") -> str:
        """The text this pass injects: ``"tags"``, the kept blocks in ``<context>``
        tags, stable sources first, joined by a blank line; ``"lionagi"``, LionAGI's
        fold ``system + "\\n".join(blocks) + guidance`` in registration order."""
        if style == "tags":
            return render_context(self.outcomes, framed=self.framed)
        if style == "lionagi":
            return render_lionagi(system, (o.text or "" for o in self.kept), guidance)
        raise InvalidValue(f"style must be 'tags' or 'lionagi', got {style!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # by value (a frozen slots dataclass does not unpickle on Python 3.10)
        return (Report, tuple(getattr(self, f.name) for f in fields(self)))

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


_NAME_DIGEST = attrgetter("name", "digest")


def _counted(o: Outcome) -> str:
    return f"{o.tokens} tokens" if o.exact else f"at least {o.tokens} tokens (counting stopped)"


def build_report(outcomes: Sequence[Outcome], budget: Number | None, *,
                 previous: Digests | None = None, digests: bool | None = True,
                 framed: bool = False, started: float | None = None,
                 tokenizer_load_ms: float = 0.0,
                 dedupe: Callable[[Outcome], Hashable] | None = None,
                 baseline: Callable[[Pairs], Pairs | None] | None = None) -> Report:
    """Admission (caps, ``budget``, ``dedupe``: a row's text key) over ``outcomes``,
    then the report; a skipped row is a new outcome with its reason. ``digests``:
    ``True`` digests and compares with ``previous``; ``None`` digests when read.
    ``baseline``: stores this pass's fingerprints, returns the previous pass's to compare."""
    rows = list(outcomes)
    texted: list[int] = []
    sized: list[int] = []
    offered, capped, volatile = 0, False, False
    for i, o in enumerate(rows):  # one walk, attributes read as bytecode does best (3.11)
        status = o.status
        if status is _FIRED:
            texted.append(i)
            offered += o.tokens
            if o.max_tokens:
                capped = True
            volatile = volatile or o.volatile
        elif status is _SIZE:
            sized.append(i)
    fired = outcomes if len(texted) == len(rows) else [rows[i] for i in texted]
    keys = None
    if dedupe is not None:
        keys = list(map(dedupe, fired))
        if len(set(keys)) == len(keys):
            keys = None  # the common pass: every text distinct
    used = offered
    kept: list[int] = texted
    skipped: tuple[int, ...] = ()
    if keys is not None or (budget is not None and offered > budget) or capped:
        # else all fit, none capped: every one kept (the realistic registry rows)
        decision = admit_columns([o.tokens for o in fired], [o.priority for o in fired],
                                 [o.max_tokens for o in fired], budget, keys)
        kept, used = [texted[k] for k in decision.kept], decision.used
        skipped = tuple(texted[k] for k in decision.skipped)
        for k, first in decision.duplicates:
            o = fired[k]
            offered -= o.tokens  # the same text as one offered already
            rows[texted[k]] = o.replace(status=Status.SKIPPED, digest=None,
                                        reason=f"duplicate of {fired[first].name}")
        for k in decision.skipped_cap:
            o = fired[k]
            rows[texted[k]] = o.replace(status=Status.SKIPPED_CAP, digest=None,
                                        reason=f"{_counted(o)} over its cap of {o.max_tokens:g}")
        for k, room in zip(decision.skipped_budget, decision.room, strict=False):
            o = fired[k]
            rows[texted[k]] = o.replace(
                status=Status.SKIPPED_BUDGET, digest=None,
                reason=f"{_counted(o)} did not fit the {room:g} left of budget {budget:g}")
    current: Digests | None = None if digests is None else ()
    brk: CacheBreak | None = None
    stable: bool | None = None
    if digests and baseline is not None:
        # fingerprints compared, digests made when read (the registry and features rows)
        # every fired row kept, none volatile: they are the blocks shown, in order
        shown = fired if kept is texted and not volatile else kept_in_order(rows)
        pairs = fingerprints(shown)
        before = baseline(pairs)
        if before and before[0][1].__class__ is str:  # digests (say a stored turn's)
            pairs = tuple(map(_NAME_DIGEST, shown))
        brk = compare(before, pairs)
        stable = None if before is None else brk is None
        current = None
    elif digests:
        for i in kept:
            o = rows[i]
            if o.digest is None:  # gather digests what it counts; a row made elsewhere
                rows[i] = o.replace(digest=digest(o.text or ""))
        current = tuple(map(_NAME_DIGEST, kept_in_order(rows)))
        if current == previous:
            current = previous  # the previous pass's pairs kept, not a new tuple of them
        brk = compare(previous, current)
        stable = None if previous is None else brk is None
    duration = 0.0 if started is None else (perf_counter() - started) * 1000.0 - tokenizer_load_ms
    return Report(tuple(rows), budget, used, offered, duration, tokenizer_load_ms, current,
                  stable, brk, (*sized, *skipped), framed)

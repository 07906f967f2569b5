"""What happened to one provider in one pass."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from ._exceptions import SourceUnavailable

__all__ = ["DIGEST_LATER", "NoText", "Outcome", "SourceUnavailable", "Status"]


class NoText(str):
    """An empty answer that says why: a provider returns ``NoText("...")`` where it would
    return ``None``; its row is ``empty`` with that reason (agentium's ``fetch``: ``None``)."""

    reason: str

    def __new__(cls, reason: str) -> NoText:
        obj = super().__new__(cls, "")
        obj.reason = reason
        return obj


class Status(str, Enum):
    """The fate of one provider in one pass."""

    FIRED = "fired"
    """Returned text that was kept (injected)."""
    EMPTY = "empty"
    """Returned ``None`` or ``""`` (the reason says which, or the source's own why)."""
    FAILED = "failed"
    """Raised, returned a non-string, or its text could not be counted."""
    TIMEOUT = "timeout"
    """Ran past its own timeout or the pass's deadline; cancelled."""
    SKIPPED_CAP = "skipped_cap"
    """Returned more tokens than its own cap (``max_tokens``)."""
    SKIPPED_BUDGET = "skipped_budget"
    """Did not fit in what was left of the total budget."""
    SKIPPED_SIZE = "skipped_size"
    """Returned more characters than its size limit (``max_chars``); never counted."""
    SKIPPED = "skipped"
    """Not called at all (for example on a branch with no system message)."""

    def __str__(self) -> str:
        return self.value


@dataclass(slots=True)
class Outcome:
    """One provider's result for one pass: ``text`` (framed where the face frames),
    ``tokens``, ``duration_ms``; ``reason`` says why a row not ``fired`` or ``empty`` ended
    so. Never changed once handed out (a later stage makes a new one with :meth:`replace`;
    not frozen only because a frozen dataclass costs several times more to construct)."""

    name: str
    index: int
    status: Status
    text: str | None = None
    tokens: int = 0
    duration_ms: float = 0.0
    error_type: str | None = None
    error: str | None = None
    reason: str | None = None
    degradation_reason: str | None = None
    cached: bool = False
    stale: bool = False
    priority: float = 0
    max_tokens: float | None = None
    exact: bool = True
    """False when counting stopped early: ``tokens`` is then a lower bound that
    already exceeds the cap or the budget (the text was skipped, never sent)."""
    started_ns: int | None = None
    """Wall-clock start of the call (``time.time_ns()``), for trace spans."""
    digest: str | None = None
    """Digest of the kept block's text (see :mod:`lionctx._stability`)."""
    volatile: bool = False
    """The source was registered ``volatile=True``: rendered after the stable blocks."""
    circuit: str | None = None
    """Circuit breaker state that decided this call: ``"open"`` (not called) or
    ``"half_open"`` (this call was the trial)."""
    blame: str | None = None
    """Whose failure a ``failed``/``timeout`` row is: ``"user"``, ``"source"``,
    ``"deadline"`` or ``"overload"`` (the last two never counted by a breaker); ``None``:
    decided from the fields the provider reads (``docs/breakers.md``)."""

    def replace(self, **changes: Any) -> Outcome:
        """A new outcome with ``changes`` applied; this one is left as it is."""
        new = Outcome(self.name, self.index, self.status, self.text, self.tokens,
                      self.duration_ms, self.error_type, self.error, self.reason,
                      self.degradation_reason, self.cached, self.stale, self.priority,
                      self.max_tokens, self.exact, self.started_ns,
                      _DIGEST.__get__(self),  # as it is: a digest not read yet stays unmade
                      self.volatile, self.circuit, self.blame)
        for key, value in changes.items():
            setattr(new, key, value)  # the new row, not yet seen by anyone
        return new

    @property
    def ok(self) -> bool:
        """True when the provider returned text (kept or not)."""
        return self.text is not None

    def to_dict(self, *, include_text: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; the text itself only when asked for."""
        data = asdict(self)
        data["status"] = self.status.value
        if not include_text:
            data.pop("text")
        return data


#: A kept row's ``digest``, made when first read (the realistic registry, features rows).
DIGEST_LATER: Any = object()
_DIGEST: Any = vars(Outcome)["digest"]  # the slot


def _digest(row: Outcome) -> str | None:
    found = _DIGEST.__get__(row)
    if found is DIGEST_LATER:
        from ._stability import digest  # imports this module
        found = digest(row.text or "")
        _DIGEST.__set__(row, found)
    return found  # type: ignore[no-any-return]


setattr(Outcome, "digest", property(  # noqa: B010  # set in C: no call per row made
    _digest, _DIGEST.__set__, doc="Digest of the kept block's text (made when first read)."))

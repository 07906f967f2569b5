"""The two faces' frozen views of one :class:`~lionctx._report.Report`:
:class:`ProviderReport` (LionAGI's lists) and :class:`Resolution` (agentium's string).
Every field is computed when read: a list a caller changes is the caller's copy."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any, Generic, TypeVar

from ._exceptions import InvalidType
from ._outcome import Outcome, Status
from ._report import Report
from ._stability import CacheBreak, Digests
from ._types import Number

__all__ = ["ProviderReport", "Resolution"]

_EMPTY = Report()
T = TypeVar("T")


class _Field(Generic[T]):
    """A view's field: the report's field of the same name, read each time."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, view: Any, owner: Any = None) -> T:
        if view is None:
            return self  # type: ignore[return-value]  # the class's own attribute
        return getattr(view.report, self.name)  # type: ignore[no-any-return]


class _View:
    """A frozen view of one report: equal when the reports are equal, pickled by it."""

    __slots__ = ("__weakref__", "report")
    report: Report
    _REPR: tuple[str, ...] = ()

    def __init__(self, report: Report = _EMPTY) -> None:
        if not isinstance(report, Report):
            raise InvalidType(f"{type(self).__name__}() takes a Report, got {report!r}")
        object.__setattr__(self, "report", report)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.report == other.report

    __hash__ = None  # type: ignore[assignment]  # its fields are lists

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.report,))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._REPR)
        return f"{type(self).__name__}({shown})"

    @property
    def outcomes(self) -> list[Outcome]:
        """One row per provider, in source (registration or list) order."""
        return list(self.report.outcomes)

    budget = _Field[Number | None]("The pass's token budget, or ``None``.")
    used_tokens = _Field[int]("Tokens of the kept blocks.")
    duration_ms = _Field[float]("Wall time of the pass, not counting the one-time tokenizer load.")
    tokenizer_load_ms = _Field[float]("Time spent loading the token encoding (the first "
                                      "pass in a process only).")
    cache_break = _Field[CacheBreak | None]("The first block that differs from the "
                                            "previous pass's, ``None`` when none does.")
    prefix_stable = _Field[bool | None]("The injected blocks are byte-identical to the "
                                        "previous pass's (``None`` without a previous pass).")

    def _figures(self, include_text: bool, *omit: str) -> dict[str, Any]:
        """The report's own JSON view without the ``omit`` keys this face leaves out."""
        figures = self.report.to_dict(include_text=include_text)
        for key in omit:
            del figures[key]
        return figures


class ProviderReport(_View):
    """What one provider pass did: LionAGI's report, a view of one :class:`Report`
    (``ProviderReport(report)``; empty by default). Its first five fields are
    LionAGI's (``blocks[i]`` and ``fired[i]`` are the same kept block); each read
    returns a new list.
    """

    __slots__ = ()
    _REPR = ("blocks", "fired", "skipped", "failed", "degraded", "budget", "used_tokens")

    @property
    def blocks(self) -> list[str]:
        """The kept blocks' text, in registration order."""
        return [o.text or "" for o in self.report.kept]

    @property
    def fired(self) -> list[dict[str, Any]]:
        """``{"provider_name", "tokens"}`` of each kept block, in registration order."""
        return [{"provider_name": o.name, "tokens": o.tokens} for o in self.report.kept]

    @property
    def skipped(self) -> list[str]:
        """Names left out by size, cap or budget, in LionAGI's order."""
        outcomes = self.report.outcomes
        return [outcomes[i].name for i in self.report.skip_order]

    @property
    def failed(self) -> list[str]:
        """Names of providers that raised, returned a non-string or timed out."""
        return [o.name for o in self.report.outcomes
                if o.status is Status.FAILED or o.status is Status.TIMEOUT]

    @property
    def degraded(self) -> list[dict[str, Any]]:
        """``{"provider_name", "reason"}`` of each provider that said it was degraded."""
        return [{"provider_name": o.name, "reason": o.degradation_reason}
                for o in self.report.outcomes if o.degradation_reason is not None]

    offered_tokens = _Field[int]("Tokens of every block providers returned, kept or not.")

    @property
    def names(self) -> list[str]:
        """Names of the kept blocks, in order."""
        return [o.name for o in self.report.kept]

    def to_dict(self, *, include_text: bool = False) -> dict[str, Any]:
        """A JSON-ready view of the report (the blocks' text only when asked for)."""
        return {
            "fired": self.fired,
            "skipped": self.skipped,
            "failed": self.failed,
            "degraded": self.degraded,
            **self._figures(include_text, "digests"),
            **({"blocks": self.blocks} if include_text else {}),
        }


class Resolution(_View):
    """The merged context string and what happened to each provider: agentium's
    result, a view of one :class:`Report`. ``str(resolution)`` is ``text``."""

    __slots__ = ()
    _REPR = ("text", "outcomes", "budget", "used_tokens")

    @property
    def text(self) -> str:
        """The ``<context>`` blocks, stable sources first, joined by a blank line."""
        return self.report.render()

    def __str__(self) -> str:
        return self.text

    digests = _Field[Digests]("``(name, digest)`` of each block in ``text``, in order: pass "
                              "this resolution as the next turn's ``previous=`` to learn "
                              "whether the prefix stayed stable.")

    @property
    def fired(self) -> list[str]:
        """Names whose blocks are in ``text``, in source order."""
        return [o.name for o in self.report.kept]

    def to_dict(self, *, include_text: bool = False) -> dict[str, Any]:
        """A JSON-ready view (the providers' own text only when asked for)."""
        return {"text": self.text, **self._figures(include_text, "offered_tokens", "digests")}

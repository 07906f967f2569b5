"""What every host integration shares: checked options, one resolve per user turn.

A host's tool loop asks for its instructions before every model call of a turn. The
integrations resolve the providers once per turn (keyed by an object the host keeps
for the whole turn) and hand back the same string on every later call of that turn,
so the providers run once and the request prefix stays byte-identical for prompt
caches. The :class:`~lionctx.Resolution` of the turn is the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .._adapters import fetch_method, retrieve_method
from .._context import bind_run_context, coerce_run_context
from .._exceptions import InvalidType
from .._policy import Policy, check_number
from ..resolve import Resolution, resolve_context

__all__ = ["TurnResolver", "compose", "text_of"]

from .._log import logger_for

logger = logger_for(__name__)

#: The keyword options of :func:`lionctx.resolve_context` an integration accepts.
RESOLVE_OPTIONS = ("timeout", "deadline", "budget", "limit", "counter", "on_outcome",
                   "breaker", "dedupe")  # issue 13: breaker, dedupe


def _check_providers(providers: Any, where: str) -> list[Any]:
    if isinstance(providers, (str, bytes)) or not isinstance(providers, Sequence):
        raise InvalidType(f"{where}: providers must be a list of context providers, "
                        f"got {providers!r}")
    for i, provider in enumerate(providers):
        if (retrieve_method(provider) is None and fetch_method(provider) is None
                and not callable(getattr(provider, "provide", None))):
            raise InvalidType(f"{where}: providers[{i}] ({provider!r}) has no fetch(query, ctx), "
                            f"fetchContext(query, ctx) or provide(branch, instruction)")
    return list(providers)


def _check_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(options) - set(RESOLVE_OPTIONS))
    if unknown:
        raise InvalidType(f"{where}: unknown option {unknown[0]!r} "
                        f"(accepted: {', '.join(RESOLVE_OPTIONS)})")
    checked = dict(options)
    # The shared knobs are checked by the one policy (the same errors as anywhere).
    policy = Policy(checked.get("timeout"), checked.get("deadline"), checked.get("limit"),
                    checked.get("counter"), checked.get("on_outcome"))
    for label in ("timeout", "deadline", "limit"):
        if label in checked:
            checked[label] = getattr(policy, label)
    if "budget" in checked:
        checked["budget"] = check_number(checked["budget"], "budget", allow_none=True)
    return checked


def text_of(value: Any) -> str:
    """The text of a prompt that may be multimodal.

    A ``str`` is itself; a sequence of parts gives its text parts (``str`` items,
    ``{"text": ...}`` / ``{"type": "input_text", "text": ...}`` mappings, objects with
    a ``str`` ``text`` or ``content``) joined with a newline; anything else (images,
    audio, files) is left out.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("text", "content"):
            inner = value.get(key)
            if isinstance(inner, str):
                return inner
            if isinstance(inner, (list, tuple)):
                return text_of(inner)
        return ""
    if isinstance(value, (list, tuple)):
        return "\n".join(t for t in (text_of(part) for part in value) if t)
    for attr in ("text", "content"):
        inner = getattr(value, attr, None)
        if isinstance(inner, str):
            return inner
    return ""


def compose(base: str | None, context: str) -> str:
    """The host's own instructions, then the context blocks, a blank line between."""
    if base and context:
        return f"{base}\n\n{context}"
    return base or context


class TurnResolver:
    """Resolve ``providers`` at most once per turn; keep each turn's report.

    ``turn`` is a host value that names exactly one user turn: an object the host
    keeps for the turn (compared by identity when unhashable) or an id string. The
    reports of the latest :attr:`KEEP` turns are kept.
    """

    KEEP = 64

    def __init__(self, providers: Any, options: Mapping[str, Any], where: str) -> None:
        self.providers = _check_providers(providers, where)
        self.options = _check_options(options, where)
        self.resolves = 0
        self.last_report: Resolution | None = None
        # slot -> (turn, resolution); the turn is held so an id cannot be reused.
        self._turns: dict[Any, tuple[Any, Resolution]] = {}
        self._locks: dict[Any, anyio.Lock] = {}

    @staticmethod
    def _slot(turn: Any) -> Any:
        try:
            hash(turn)
        except TypeError:
            return ("id", id(turn))
        return ("value", turn)

    def report_for(self, turn: Any) -> Resolution | None:
        """The report of ``turn``, or ``None`` when it has not resolved."""
        held = self._turns.get(self._slot(turn))
        return held[1] if held is not None else None

    def _store(self, turn: Any, resolution: Resolution) -> None:
        self._turns[self._slot(turn)] = (turn, resolution)
        while len(self._turns) > self.KEEP:
            self._turns.pop(next(iter(self._turns)))

    async def resolve(self, turn: Any, query: Any, ctx: Any) -> Resolution:
        """This turn's resolution: computed on the first call, the same object after."""
        done = self.report_for(turn)
        if done is not None:
            return done
        slot = self._slot(turn)
        lock = self._locks.setdefault(slot, anyio.Lock())
        try:
            async with lock:
                done = self.report_for(turn)
                if done is not None:
                    return done
                run_ctx = coerce_run_context(ctx)
                # Bound for the providers too, so nested lionctx code sees the same user.
                with bind_run_context(run_ctx):
                    resolution = await resolve_context(self.providers, text_of(query), run_ctx,
                                                       previous=self.last_report,  # issue 13
                                                       **self.options)
                self.resolves += 1
                self._store(turn, resolution)
                self.last_report = resolution
                logger.debug("resolved context for a turn: fired=%s", resolution.fired)
                return resolution
        finally:
            if not lock.locked():
                self._locks.pop(slot, None)


class ResolverBacked:
    """What every host adapter reports about its turns, read from its resolver."""

    _resolver: TurnResolver

    @property
    def resolves(self) -> int:
        """How many times the providers were resolved (one per user turn)."""
        return self._resolver.resolves

    @property
    def last_report(self) -> Resolution | None:
        """The report of the most recent turn."""
        return self._resolver.last_report

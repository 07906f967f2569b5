"""What a face hands the engine for each provider: a :class:`ProviderCall`.

The registry builds its calls once per registration and reuses them every pass;
``resolve_context`` keeps one per provider across calls, holding the provider weakly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ._outcome import Outcome

__all__ = ["TAG_FRAME", "Observer", "ProviderCall"]

#: Called with each outcome as soon as it is known (live progress, traces).
Observer = Callable[[Outcome], None]

@dataclass(slots=True)
class ProviderCall:
    """One provider, ready to run: ``invoke(*args)`` performs the call, with the
    pass's ``args`` (a registry's calls are built once and reused every pass).

    ``frame`` turns the returned text into what is sent, and so what is counted
    (a tag block); :data:`TAG_FRAME` frames it in the call's own ``<context>`` tag
    (as ``partial(tag_block, name)`` does, with no object per call); ``keep_frame``
    says whether the outcome holds the framed text (the agentium face) or the bare
    text (a branch that renders tags itself).
    ``timeout`` overrides the pass's per-provider timeout for this call and
    ``max_chars`` its size limit.
    """

    name: str
    provider: Any
    invoke: Callable[..., Awaitable[Any]]
    frame: Callable[[str], str] | None = None
    timeout: float | None = None
    priority: float = 0
    max_tokens: float | None = None
    max_chars: int | None = None
    keep_frame: bool = True


class _TagFrame:
    """The type of :data:`TAG_FRAME`."""

    __slots__ = ()

    def __call__(self, text: str) -> str:  # pragma: no cover  (gather never calls it)
        raise TypeError("TAG_FRAME frames with the call's name: only gather applies it")

    def __repr__(self) -> str:
        return "TAG_FRAME"


#: A ``frame`` that wraps a call's text in its own ``<context name=...>`` tag.
TAG_FRAME: Callable[[str], str] = _TagFrame()

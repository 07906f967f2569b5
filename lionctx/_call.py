"""What a face hands the engine for each provider: a :class:`ProviderCall`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ._outcome import Outcome
from ._render import tag_block

__all__ = ["TAG_FRAME", "Observer", "ProviderCall"]

#: Called with each outcome as soon as it is known (live progress, traces).
Observer = Callable[[Outcome], None]


@dataclass(slots=True)
class ProviderCall:
    """One provider, ready to run (``invoke(*args)``); ``frame`` makes the text sent and
    counted (kept framed with ``keep_frame``); ``timeout``/``max_chars`` override the pass's."""

    name: str
    provider: Any
    invoke: Callable[..., Awaitable[Any]]
    frame: Callable[[str], str] | None = None
    timeout: float | None = None
    priority: float = 0
    max_tokens: float | None = None
    max_chars: int | None = None
    keep_frame: bool = True

    def framed(self, text: str) -> str:
        """``text`` in this call's ``<context>`` tag (:data:`TAG_FRAME`)."""
        return tag_block(self.name, text)


class _TagFrame:
    """A ``frame`` gather applies as ``partial(tag_block, name)`` would, with no object
    per call (an instance: a function would bind as a method as a class default)."""

    __slots__ = ()

    def __call__(self, text: str) -> str:  # pragma: no cover  (gather never calls it)
        raise TypeError("TAG_FRAME frames with the call's name: only gather applies it")

    def __repr__(self) -> str:
        return "TAG_FRAME"


TAG_FRAME: Callable[[str], str] = _TagFrame()

"""What a chat model adapter promises: the response type and the protocol (the errors
are in :mod:`lionctx._exceptions`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["ChatModel", "ChatResponse", "ChatStream"]


@dataclass
class ChatResponse:
    """One model reply. ``tool_calls`` are OpenAI-format dicts (``arguments`` the model's
    JSON string); ``usage`` the server's usage dict or None; ``raw`` the client's response."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    model: str | None = None
    raw: Any = field(default=None, repr=False)

    @property
    def text(self) -> str:
        """``content``, or ``""`` when the reply had none (e.g. only tool calls)."""
        return self.content or ""

    def to_message(self) -> dict[str, Any]:
        """The assistant message to store for this reply."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [{**c, "function": dict(c.get("function") or {})}
                                 for c in self.tool_calls]
        return msg


@runtime_checkable
class ChatStream(Protocol):
    """An async iterator of text deltas; ``response`` and ``usage`` once it ends."""

    response: ChatResponse | None
    usage: dict[str, Any] | None

    def __aiter__(self) -> AsyncIterator[str]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ChatModel(Protocol):
    """Anything a :class:`~lionctx.Branch` or an Agent can send requests through."""

    async def complete(self, messages: Sequence[Mapping[str, Any]], *,
                       tools: Sequence[Mapping[str, Any]] | None = None,
                       **kwargs: Any) -> ChatResponse: ...

    def stream(self, messages: Sequence[Mapping[str, Any]], *,
               tools: Sequence[Mapping[str, Any]] | None = None, **kwargs: Any) -> ChatStream: ...

"""A streamed reply of countless small deltas (a model's text, or a tool call's arguments
a piece at a time): assembling it must copy each piece a bounded number of times, never
the whole text so far once per piece (``+=`` on a held string: quadratic, on the loop).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from lionctx.models import OpenAIChatModel
from lionctx.models._openai_chat import StreamAssembly
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import (
    Choice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)

pytestmark = pytest.mark.anyio

PIECES = 4000
copied: list[int] = []


class Piece(str):
    """A delta that records how many characters are copied when it is appended to a str
    (``text + piece`` asks the subclass first: ``__radd__``)."""

    def __radd__(self, other: str) -> str:
        copied.append(len(other))
        return str.__add__(other, self)


def chunk(piece: str, *, tool: bool) -> ChatCompletionChunk:
    """A real chunk whose delta is ``piece`` (set after validation, which makes a plain str)."""
    fn = ChoiceDeltaToolCallFunction(name="f", arguments="")
    delta = ChoiceDelta(tool_calls=[ChoiceDeltaToolCall(index=0, function=fn)] if tool else None)
    object.__setattr__(fn if tool else delta, "arguments" if tool else "content", piece)
    return ChatCompletionChunk(id="c", object="chat.completion.chunk", created=0, model="m",
                               choices=[Choice(index=0, delta=delta, finish_reason=None)])


@pytest.fixture(autouse=True)
def _fresh() -> None:
    copied.clear()


def test_tool_call_arguments_in_countless_pieces_are_copied_once() -> None:
    assembly = StreamAssembly()
    for _ in range(PIECES):
        assembly.feed(chunk(Piece("ab"), tool=True))
    calls = assembly.response().tool_calls
    assert calls[0]["function"]["arguments"] == "ab" * PIECES
    assert sum(copied) <= 2 * PIECES, f"{sum(copied):,} characters copied for {2 * PIECES:,}"


class Chunks:
    """What the openai client's stream is to the model: chunks, then ``close``."""

    def __init__(self, chunks: list[ChatCompletionChunk]) -> None:
        self.chunks = chunks

    def __aiter__(self) -> AsyncIterator[ChatCompletionChunk]:
        async def each() -> AsyncIterator[ChatCompletionChunk]:
            for c in self.chunks:
                yield c
        return each()

    async def close(self) -> None:
        pass


async def test_a_reply_in_countless_deltas_is_copied_once(monkeypatch: Any) -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="k")

    async def create(body: dict[str, Any]) -> Chunks:
        return Chunks([chunk(Piece("ab"), tool=False) for _ in range(PIECES)])

    monkeypatch.setattr(model, "_create", create)
    stream = model.stream([{"role": "user", "content": "hi"}])
    said = [text async for text in stream]
    assert len(said) == PIECES
    assert stream.content == "ab" * PIECES
    assert stream.response is not None and stream.response.content == "ab" * PIECES
    assert sum(copied) <= 2 * PIECES, f"{sum(copied):,} characters copied for {2 * PIECES:,}"

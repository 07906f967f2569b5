"""A flood inside the history dedupe reads: one tool result or reply made of millions of
paragraphs. The history index keeps at most ``max_blocks`` digests; reading one message
must cost no more than that in digests taken or held, whatever the message holds.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, Status, _dedupe
from lionctx._dedupe import HistoryIndex

pytestmark = pytest.mark.anyio

RULE = "Never share a customer's password."
PARAGRAPHS = 400_000


class HeldPeak(OrderedDict[bytes, int]):
    """The index's digest store, remembering the most entries it ever held."""

    peak = 0

    def __setitem__(self, key: bytes, value: int) -> None:
        super().__setitem__(key, value)
        HeldPeak.peak = max(HeldPeak.peak, len(self))


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lengths of the texts the index digests."""
    seen: list[int] = []
    real = _dedupe._digest

    def counted(text: str) -> bytes:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(_dedupe, "_digest", counted)
    HeldPeak.peak = 0
    return seen


def flood(paragraphs: int = PARAGRAPHS) -> str:
    return "\n\n".join(f"p{i}" for i in range(paragraphs))


def test_a_message_of_countless_paragraphs_costs_at_most_max_blocks_digests(digests):
    index = HistoryIndex(max_blocks=64)
    index._blocks = HeldPeak()
    index.update([{"role": "tool", "content": flood()}])
    assert len(digests) <= 64 + 1, f"{len(digests):,} digests for one message"
    assert HeldPeak.peak <= 64 + 1, "one over, then trimmed at once"
    assert index.find("p5") == 0, "the message's first paragraphs are still found"


def test_many_such_messages_hold_max_blocks_at_any_time(digests):
    index = HistoryIndex(max_blocks=64)
    index._blocks = HeldPeak()
    index.update([{"role": "assistant", "content": flood(1000)} for _ in range(50)])
    assert HeldPeak.peak <= 64 + 1, "one over, then trimmed at once"
    assert len(digests) <= 50 * (64 + 1)


async def test_a_flooded_tool_result_leaves_the_turn_deduping(digests):
    class Owner:
        dedupe_history = True
        run_context = None

        def __init__(self) -> None:
            self.messages: list[dict[str, Any]] = [
                {"role": "tool", "content": flood()}, {"role": "assistant", "content": RULE}]

    class Rules:
        name = "rules"

        async def provide(self, branch: object, instruction: object) -> str:
            return RULE

    reg = ContextProviderRegistry(breaker=False)
    reg.register(Rules())
    report = await reg.gather(Owner(), None)
    assert [o.status for o in report.report.outcomes] == [Status.SKIPPED]
    assert len(digests) <= 2 * (HistoryIndex().max_blocks + 1) + 1


def split_blocks(text: str) -> list[str]:
    """The blocks of a message as the paragraph rule defines them, read all at once."""
    whole = text.strip()
    if not whole:
        return []
    parts = [p.strip() for p in _dedupe._PARAGRAPH_BREAK.split(whole)]
    return [whole, *[p for p in parts if p and p != whole]]


@given(st.lists(st.sampled_from(["a", "b c", " ", "\n", "\n\n", "\n \t\n", "\r", "x\n"]),
                max_size=30).map("".join))
def test_blocks_read_one_at_a_time_are_the_paragraph_rules_blocks(text: str) -> None:
    assert list(_dedupe._blocks(text)) == split_blocks(text)

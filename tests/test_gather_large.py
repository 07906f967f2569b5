"""A text over 64K characters gets the row a short one would, counted off the event loop."""

from __future__ import annotations

import threading

import anyio
import pytest
from lionctx import Status
from lionctx._gather import TAG_FRAME, ProviderCall, gather
from lionctx._render import tag_block
from lionctx._tokens import count_tokens, get_counter

#: About 100K characters with 4,000 lone surrogates: made encodable in a worker.
LARGE = "words of a long page \ud800 " * 4_000
CLEAN = LARGE.replace("\ud800", "\ufffd")


async def _answer() -> str:
    return LARGE


@pytest.mark.parametrize("framed", [False, True])
@pytest.mark.parametrize("keep", [False, True])
def test_a_large_text_gets_the_row_a_short_one_would(framed: bool, keep: bool) -> None:
    call = ProviderCall("big", None, _answer, TAG_FRAME if framed else None, keep_frame=keep)

    async def twice() -> list:
        return [(await gather([call], counter=get_counter(), budget=10**9))[0]
                for _ in range(2)]

    block = tag_block("big", CLEAN)
    # the second pass finds the count in the memo and frames the text for its row only
    for row in anyio.run(twice):
        assert (row.status, row.exact) == (Status.FIRED, True), row.reason
        assert row.text == (block if framed and keep else CLEAN)
        assert row.tokens == count_tokens(block if framed else CLEAN)
        assert row.degradation_reason is not None
        assert "replaced 4000 lone surrogate(s)" in row.degradation_reason


def test_a_large_text_is_counted_off_the_event_loop() -> None:
    threads: list[int] = []

    def counter(text: str) -> int:
        threads.append(threading.get_ident())
        return len(text) // 4

    async def short() -> str:
        return "a short text"

    async def run() -> tuple[int, list]:
        calls = [ProviderCall("big", None, _answer), ProviderCall("short", None, short)]
        return threading.get_ident(), await gather(calls, counter=counter, budget=10**9)

    loop_thread, rows = anyio.run(run)
    assert [r.tokens for r in rows] == [len(CLEAN) // 4, len("a short text") // 4]
    big_thread, short_thread = threads
    assert big_thread != loop_thread and short_thread == loop_thread

"""Attack: a source that really is slow hiding behind the overload excuse.

The heartbeat measures the loop's lag only while timed calls run, so the first calls
of a burst had no reading yet and could count against healthy sources. A call's own
look at its task, when its time runs out, runs as late as the loop is behind: that
lateness is a reading of the lag too, for a call that had its answer. A call still
waiting on its source when its time runs out gets no such excuse."""

from __future__ import annotations

import asyncio

import pytest
from lionctx import Breakers, BreakerSettings, Status, resolve_context

from tests.fakes import Clock

pytestmark = pytest.mark.anyio


class Answers:
    def __init__(self, name: str, wait: float) -> None:
        self.name = name
        self.wait = wait

    async def fetch(self, query, ctx):
        await asyncio.sleep(self.wait)
        return f"{self.name} ok"


async def test_a_source_still_waiting_when_its_time_runs_out_counts():
    board = Breakers(BreakerSettings(threshold=2), clock=Clock())
    slow = Answers("slow", 1.0)
    for _ in range(2):
        (row,) = (await resolve_context([slow], "q", timeout=0.05, breaker=board)).outcomes
        assert row.status is Status.TIMEOUT and row.blame is None, row.reason
    (row,) = (await resolve_context([slow], "q", timeout=0.05, breaker=board)).outcomes
    assert row.status is Status.SKIPPED, "its circuit opened"

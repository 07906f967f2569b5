"""Attacks with blocking providers: a sync ``provide`` or ``fetch`` must not hold the
event loop, and its timeout holds although Python cannot stop a thread."""

import threading
import time

import anyio
import pytest
from lionctx import ContextProviderRegistry, Status, resolve_context

from .conftest import Static

pytestmark = pytest.mark.anyio

@pytest.fixture
def anyio_backend(both_backends):
    # concurrency, time and containment hold on asyncio and on trio alike
    return both_backends



class SleepyProvide:
    name = "sleepy"

    def __init__(self, seconds=10.0):
        self.seconds = seconds
        self.release = threading.Event()  # set by the test once it has looked
        self.finished = threading.Event()

    def provide(self, branch, instruction):  # sync on purpose: blocks its thread
        self.release.wait(self.seconds)
        self.finished.set()
        return "late text"


class SleepyFetch(SleepyProvide):
    def fetch(self, query, ctx):  # sync on purpose: blocks its thread
        self.release.wait(self.seconds)
        self.finished.set()
        return "late text"


@pytest.mark.parametrize("concurrent", [False, True])
async def test_a_blocking_provide_is_cut_off_at_its_timeout(concurrent):
    reg = ContextProviderRegistry(timeout=0.3, concurrent=concurrent)
    slow = SleepyProvide()
    reg.register(slow)
    reg.register(Static("fast", "ok"))
    report = await reg.gather(None, "q")
    # Back while the provider still sleeps: the broken code held the turn until it woke.
    assert not slow.finished.is_set()
    slow.release.set()
    assert [o.status for o in report.outcomes] == [Status.TIMEOUT, Status.FIRED]
    assert report.blocks == ["ok"]


async def test_a_blocking_fetch_is_cut_off_under_a_deadline_without_blaming_others():
    slow = SleepyFetch()
    res = await resolve_context([slow, Static("fast", "ok")], "q", deadline=0.3)
    assert not slow.finished.is_set()  # back while the fetch still sleeps
    slow.release.set()
    assert [o.status for o in res.outcomes] == [Status.TIMEOUT, Status.FIRED]
    assert res.text == '<context name="fast">\nok\n</context>'
    # The abandoned thread finishes later; its text was dropped, never injected.
    await anyio.to_thread.run_sync(slow.finished.wait, 5)
    assert "late text" not in res.text


class LoopWitness:
    """A sync ``provide`` that blocks until the event loop has run a few ticks: it
    can only be released if it is not blocking the loop itself."""

    name = "witness"

    def __init__(self) -> None:
        self.loop_ran = threading.Event()  # set by a task on the loop
        self.released: bool | None = None

    def provide(self, branch, instruction):  # sync on purpose: blocks its thread
        self.released = self.loop_ran.wait(10)  # 10 s: a hang guard, never a measure
        return "late text"


async def test_the_loop_keeps_running_while_a_sync_provide_blocks():
    ticks = 0
    witness = LoopWitness()

    async def ticker():
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1
            if ticks == 5:
                witness.loop_ran.set()

    reg = ContextProviderRegistry()
    reg.register(witness)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        report = await reg.gather(None, "q")
        tg.cancel_scope.cancel()
    # Causal, not timed: the provide returned because the loop ticked while it blocked
    # (run on the loop, it would have waited out its guard with no tick at all).
    assert witness.released is True
    assert ticks >= 5
    # LionAGI's contract: a non-async provide is a contained failure, with a reason
    # that says how to fix it.
    (row,) = report.outcomes
    assert row.status is Status.FAILED
    assert "define it with async def" in row.reason


async def test_a_sync_fetch_that_answers_is_used():
    class SyncFetch:
        name = "sync"

        def fetch(self, query, ctx):
            return f"answer to {query}"

    res = await resolve_context([SyncFetch()], "q")
    assert res.text == '<context name="sync">\nanswer to q\n</context>'


class BlocksTheLoop:
    """The limit of what anyone can do: async code that never awaits."""

    name = "blocker"

    async def provide(self, branch, instruction):
        time.sleep(0.5)  # noqa: ASYNC251 - the attack
        return "late text"

    async def fetch(self, query, ctx):
        time.sleep(0.5)  # noqa: ASYNC251 - the attack
        return "late text"


@pytest.mark.parametrize("concurrent", [False, True])
async def test_an_async_provider_that_blocks_the_loop_is_reported_and_dropped(concurrent):
    # It cannot be preempted (the README says so); it must not be injected either.
    reg = ContextProviderRegistry(timeout=0.1, concurrent=concurrent)
    reg.register(BlocksTheLoop())
    reg.register(Static("fast", "ok"))
    report = await reg.gather(None, "q")
    blocker = report.outcomes[0]
    assert blocker.status is Status.TIMEOUT
    assert "the event loop was blocked" in blocker.reason
    assert "late text" not in report.blocks
    res = await resolve_context([BlocksTheLoop()], "q", timeout=0.1)
    assert res.text == "" and "event loop was blocked" in res.outcomes[0].reason

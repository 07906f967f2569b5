"""Circuit breakers per source: the state machine, both faces, end to end."""

from __future__ import annotations

import threading

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import Breakers, BreakerSettings, ContextProviderRegistry, Status, resolve_context
from lionctx._breaker import CircuitBreaker, coerce_breakers

from tests.fakes import Clock
from tests.providers.http_server import serve

pytestmark = pytest.mark.anyio

http = pytest.fixture(serve)




class Flaky:
    """Fails while ``down``; counts calls."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.down = True
        self.calls = 0

    async def provide(self, branch, instruction):
        self.calls += 1
        if self.down:
            raise RuntimeError("down")
        return f"{self.name} ok"

    async def fetch(self, query, ctx):
        return await self.provide(None, None)


# --- the state machine ------------------------------------------------------------
def test_opens_after_three_failures_and_half_opens_after_the_cooldown():
    clock = Clock()
    b = CircuitBreaker(BreakerSettings(threshold=3, cooldown=30, max_cooldown=120), clock)
    for _ in range(2):
        assert b.allow() == (True, None)
        b.record(False)
    assert b.state == "closed"
    b.record(False)
    assert b.state == "open"
    ok, reason = b.allow()
    assert not ok and reason.startswith("circuit open until ") and "30.0s left" in reason
    clock.now += 29.9
    assert not b.allow()[0]
    clock.now += 0.1
    assert b.allow() == (True, "half_open")
    assert not b.allow()[0], "one trial at a time"
    b.record(False)  # failed trial: twice as long
    assert b.state == "open" and b.open_until == pytest.approx(clock.now + 60)
    clock.now += 60
    assert b.allow() == (True, "half_open")
    b.record(True)
    assert b.state == "closed" and b.failures == 0
    for _ in range(3):
        b.record(False)
    assert b.open_until == pytest.approx(clock.now + 30), "success resets the cool-down"


def test_cooldown_doubles_up_to_the_cap():
    clock = Clock()
    b = CircuitBreaker(BreakerSettings(threshold=1, cooldown=10, max_cooldown=35), clock)
    b.record(False)
    seen = []
    for _ in range(5):
        seen.append(b.open_until - clock.now)
        clock.now = b.open_until
        assert b.allow() == (True, "half_open")
        b.record(False)
    assert seen == [10, 20, 35, 35, 35]


def test_an_abandoned_trial_is_retried_after_another_cooldown():
    clock = Clock()
    b = CircuitBreaker(BreakerSettings(threshold=1, cooldown=5), clock)
    b.record(False)
    clock.now += 5
    assert b.allow() == (True, "half_open")  # the trial's pass is cancelled: no record
    clock.now += 4
    assert not b.allow()[0]
    clock.now += 1
    assert b.allow() == (True, "half_open")


@pytest.mark.parametrize("bad", [
    {"threshold": 0}, {"threshold": 1.5}, {"threshold": True}, {"cooldown": 0},
    {"cooldown": float("inf")}, {"cooldown": "30"}, {"cooldown": 10, "max_cooldown": 5},
])
def test_bad_settings_are_refused_by_name(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        BreakerSettings(**bad)


def test_coerce_breakers():
    board = Breakers()
    assert coerce_breakers(False) is None and coerce_breakers(None) is None
    assert coerce_breakers(True, board) is board
    assert coerce_breakers(board) is board
    assert coerce_breakers(BreakerSettings(threshold=2)).settings.threshold == 2
    with pytest.raises(TypeError, match="'yes'"):
        coerce_breakers("yes")


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.one_of(st.booleans(), st.floats(0, 100)), max_size=60),
       threshold=st.integers(1, 5))
def test_state_machine_model(events, threshold):
    """Against a plain model: True/False = a pass whose call succeeds/fails, a float
    = time passing. Calls happen only when allowed; the breaker is open exactly when
    the model says, and never opens before ``threshold`` consecutive failures."""
    clock = Clock()
    s = BreakerSettings(threshold=threshold, cooldown=10, max_cooldown=40)
    b = CircuitBreaker(s, clock)
    streak, cooldown, until, state = 0, 10.0, None, "closed"
    for ev in events:
        if isinstance(ev, float):
            clock.now += ev
            continue
        ok, note = b.allow()
        if state == "open" and clock.now < until:
            assert not ok and note.startswith("circuit open until")
            continue
        assert ok
        if state == "open":
            state = "half_open"
            assert note == "half_open"
        else:
            assert note is None
        b.record(ev)
        if ev:
            streak, cooldown, state = 0, 10.0, "closed"
        else:
            streak += 1
            if state == "half_open":
                cooldown = min(cooldown * 2, 40)
                state, until = "open", clock.now + cooldown
            elif streak >= threshold:
                state, until = "open", clock.now + cooldown
        assert b.state == state
        assert b.failures == streak
        if state == "open":
            assert streak >= threshold


def test_thread_safe_one_trial_among_many_threads():
    clock = Clock()
    b = CircuitBreaker(BreakerSettings(threshold=1, cooldown=1), clock)
    b.record(False)
    clock.now += 1
    allowed = []
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        allowed.append(b.allow()[0])

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert allowed.count(True) == 1


# --- the registry face --------------------------------------------------------------
async def test_registry_skips_an_open_source_with_the_reason_and_lets_a_trial_through():
    clock = Clock()
    reg = ContextProviderRegistry(breaker=Breakers(BreakerSettings(cooldown=30), clock=clock))
    bad, good = Flaky("bad"), Flaky("good")
    good.down = False
    reg.register(bad)
    reg.register(good)
    for _ in range(3):
        report = await reg.gather(None, None)
        assert report.outcomes[0].status is Status.FAILED
    assert bad.calls == 3
    report = await reg.gather(None, None)
    row = report.outcomes[0]
    assert bad.calls == 3, "an open circuit is not called"
    assert row.status is Status.SKIPPED and row.circuit == "open" and row.index == 0
    assert row.reason.startswith("circuit open until ")
    assert report.outcomes[1].status is Status.FIRED and report.outcomes[1].index == 1
    assert report.blocks == ["good ok"] and report.failed == []
    assert report.to_dict()["outcomes"][0]["circuit"] == "open"
    clock.now += 30
    bad.down = False
    report = await reg.gather(None, None)
    assert bad.calls == 4 and report.outcomes[0].circuit == "half_open"
    assert report.blocks == ["bad ok", "good ok"]
    assert reg.breakers.get(reg._entries[0]).state == "closed"


async def test_breaker_off_calls_every_time():
    reg = ContextProviderRegistry(breaker=False)
    bad = Flaky("bad")
    reg.register(bad)
    for _ in range(6):
        await reg.gather(None, None)
    assert bad.calls == 6 and reg.breakers is None


async def test_a_copy_has_its_own_closed_breakers():
    clock = Clock()
    reg = ContextProviderRegistry(breaker=Breakers(clock=clock))
    bad = Flaky("bad")
    reg.register(bad)
    for _ in range(3):
        await reg.gather(None, None)
    fresh = reg.copy()
    await fresh.gather(None, None)
    assert bad.calls == 4


async def test_timeouts_count_as_failures():
    class Slow:
        name = "slow"
        calls = 0

        async def provide(self, branch, instruction):
            Slow.calls += 1
            await anyio.sleep(5)

    clock = Clock()
    reg = ContextProviderRegistry(timeout=0.05, breaker=Breakers(clock=clock))
    reg.register(Slow())
    for _ in range(4):
        report = await reg.gather(None, None)
    assert Slow.calls == 3 and report.outcomes[0].status is Status.SKIPPED


# --- the agentium face -------------------------------------------------------------
async def test_resolve_context_breakers_are_per_provider_instance():
    clock = Clock()
    board = Breakers(clock=clock)
    a, b = Flaky("a"), Flaky("b")
    for _ in range(3):
        await resolve_context([a], "q", breaker=board)
    res = await resolve_context([a, b], "q", breaker=board)
    assert a.calls == 3 and b.calls == 1
    assert [o.status for o in res.outcomes] == [Status.SKIPPED, Status.FAILED]
    assert res.outcomes[0].reason.startswith("circuit open until")


async def test_resolve_context_default_board_and_off_switch():
    a = Flaky("a")
    for _ in range(4):
        await resolve_context([a], "q")
    assert a.calls == 3, "on by default"
    b = Flaky("b")
    for _ in range(4):
        await resolve_context([b], "q", breaker=False)
    assert b.calls == 4


async def test_agent_breaker_across_runs(server):
    from agentium_compat import Agent, openai

    dead = Flaky("dead")
    agent = Agent(name="a", model=openai("m", base_url=server.base_url), instructions="hi",
                  context_providers=[dead], context_breaker=Breakers())
    for _ in range(4):
        result = await agent.run("q")
    assert dead.calls == 3
    assert result.context_report.outcomes[0].circuit == "open"
    off = Agent(name="b", model=openai("m", base_url=server.base_url), instructions="hi",
                context_providers=[Flaky("x")], context_breaker=False)
    for _ in range(4):
        await off.run("q")
    assert off.context_providers[0].calls == 4


# --- end to end: a dead HTTP source --------------------------------------------------
async def test_a_dead_http_source_costs_its_timeout_three_turns_then_nothing(http):
    """A source that never answers in time costs the timeout on three turns; then the
    circuit is open and a turn costs (almost) nothing until the cool-down ends."""
    from lionctx.providers import HttpContextProvider

    timeout = 0.4
    clock = Clock()
    dead = HttpContextProvider(http.url("/slow?s=10"), name="status", timeout=5)
    reg = ContextProviderRegistry(timeout=timeout,
                                  breaker=Breakers(BreakerSettings(cooldown=30), clock=clock))
    reg.register(dead)
    try:
        statuses = []
        for _ in range(5):
            report = await reg.gather(None, None)
            statuses.append(report.outcomes[0].status)
        # Three turns waited out the timeout; then the source is not called at all.
        assert statuses == [Status.TIMEOUT] * 3 + [Status.SKIPPED] * 2
        assert report.outcomes[0].circuit == "open"
        # one request per turn 1-3 at most (on a loaded machine one may time out
        # before the server reads it), none on turns 4-5
        assert 1 <= http.count("/slow") <= 3
        clock.now += 30  # cool-down over: one trial, which costs the timeout again
        report = await reg.gather(None, None)
        assert report.outcomes[0].status is Status.TIMEOUT
        assert report.outcomes[0].circuit == "half_open"
        assert http.count("/slow") <= 4
        report = await reg.gather(None, None)
        assert report.outcomes[0].status is Status.SKIPPED
        assert "(60.0s left" in report.outcomes[0].reason, "doubled cool-down"
    finally:
        await dead.aclose()


def test_the_default_style_board_holds_providers_weakly():
    import gc
    import weakref

    board = Breakers()

    class P:
        name = "p"

        async def fetch(self, query, ctx):
            return "x"

    p = P()
    ref = weakref.ref(p)
    anyio.run(lambda p=p: resolve_context([p], "q", breaker=board))
    del p
    gc.collect()
    assert ref() is None


def test_registry_breakers_follow_entries_added_later():
    clock = Clock()
    reg = ContextProviderRegistry(breaker=Breakers(clock=clock))
    a = Flaky("a")
    reg.register(a)
    for _ in range(3):
        anyio.run(reg.gather, None, None)
    b = Flaky("b")
    reg.register(b)
    report = anyio.run(reg.gather, None, None)
    assert [o.status for o in report.outcomes] == [Status.SKIPPED, Status.FAILED]
    assert (a.calls, b.calls) == (3, 1)

"""Host integrations: a run's report says whether the injected prefix stayed
byte-identical to the previous run of the same session; breaker and dedupe options
pass through."""

from __future__ import annotations

import pytest
from lionctx import BreakerSettings, CacheBreak, RunContext
from lionctx.integrations._turns import HostHook

pytestmark = pytest.mark.anyio


class Box:
    def __init__(self, name, text):
        self.name, self.text, self.calls = name, text, 0

    async def fetch(self, query, ctx):
        self.calls += 1
        if self.text is None:
            raise RuntimeError("down")
        return self.text


class Run:
    """A host's per-run object."""


async def test_runs_of_a_session_report_prefix_stability_and_the_first_changed_block():
    status = Box("status", "up")
    resolver = HostHook([Box("notes", "n"), status])
    ctx = RunContext(user_id="u1", session_id="s1")
    run1 = Run()
    first = await resolver.resolve(run1, "q", ctx)
    assert first.prefix_stable is None
    again = await resolver.resolve(run1, "q", ctx)
    assert again is first, "one resolve per run"
    second = await resolver.resolve(Run(), "q", ctx)
    assert second.prefix_stable is True
    status.text = "down now"
    third = await resolver.resolve(Run(), "q", ctx)
    assert third.cache_break == CacheBreak("status", "changed", 1)


async def test_no_session_no_baseline():
    resolver = HostHook([Box("notes", "n")])
    await resolver.resolve(Run(), "q", RunContext(user_id="u1"))
    second = await resolver.resolve(Run(), "q", RunContext(user_id="u1"))
    assert second.prefix_stable is None and second.cache_break is None


async def test_breaker_and_dedupe_options_pass_through():
    dead = Box("dead", None)
    resolver = HostHook([Box("a", "same"), Box("b", "same"), dead],
                        breaker=BreakerSettings(threshold=2), dedupe=True)
    for _ in range(4):
        report = await resolver.resolve(Run(), "q", RunContext())
    assert dead.calls == 2
    assert report.fired == ["a"]
    assert [o.reason.split(" until")[0] for o in report.outcomes[1:]] == [
        "duplicate of a", "circuit open"]
    with pytest.raises(TypeError, match="unknown option 'cache'"):
        HostHook([], cache=True)

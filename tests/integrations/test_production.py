"""Host integrations (issue 13): each keeps its previous turn's digests, so a turn's
report says whether the injected prefix stayed byte-identical; breaker and dedupe
options pass through."""

from __future__ import annotations

import pytest
from lionctx import BreakerSettings, CacheBreak
from lionctx.testing import TurnResolver

pytestmark = pytest.mark.anyio


class Box:
    def __init__(self, name, text):
        self.name, self.text, self.calls = name, text, 0

    async def fetch(self, query, ctx):
        self.calls += 1
        if self.text is None:
            raise RuntimeError("down")
        return self.text


async def test_turns_report_prefix_stability_and_the_first_changed_block():
    status = Box("status", "up")
    resolver = TurnResolver([Box("notes", "n"), status], {}, "test")
    first = await resolver.resolve("turn-1", "q", None)
    assert first.prefix_stable is None
    again = await resolver.resolve("turn-1", "q", None)
    assert again is first, "one resolve per turn"
    second = await resolver.resolve("turn-2", "q", None)
    assert second.prefix_stable is True
    status.text = "down now"
    third = await resolver.resolve("turn-3", "q", None)
    assert third.cache_break == CacheBreak("status", "changed", 1)


async def test_breaker_and_dedupe_options_pass_through():
    dead = Box("dead", None)
    resolver = TurnResolver([Box("a", "same"), Box("b", "same"), dead],
                            {"breaker": BreakerSettings(threshold=2), "dedupe": True}, "test")
    for turn in range(4):
        report = await resolver.resolve(turn, "q", None)
    assert dead.calls == 2
    assert report.fired == ["a"]
    assert [o.reason.split(" until")[0] for o in report.outcomes[1:]] == [
        "duplicate of a", "circuit open"]
    with pytest.raises(TypeError, match="unknown option 'cache'"):
        TurnResolver([], {"cache": True}, "test")

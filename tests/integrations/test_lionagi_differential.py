"""The registry against the real LionAGI 0.36 registry, on generated scenarios.

Every scenario (providers that return text, None, "", a non-string, raise, or say
they degraded; priorities; caps including 0 and negatives; budgets including 0 and
negatives) runs through both registries, twice (stats accumulate); the five report
lists and the six stats counters must be equal. Text avoids special-token strings,
which LionAGI counts as 0 and lionctx counts as text (a documented difference).
"""

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry

lionagi_registry = pytest.importorskip("lionagi.protocols.context_providers")


class Scripted:
    def __init__(self, name, kind, value, degraded):
        self.name = name
        self.kind = kind
        self.value = value
        self.degradation_reason = degraded

    async def provide(self, branch, instruction):
        if self.kind == "raise":
            raise ValueError("boom")
        return self.value


_text = st.lists(st.sampled_from(list("ab cd\nEF.,!?'") + ["\u00e9", "\u4e2d", "word "]),
                 min_size=1, max_size=40).map("".join)
_provider = st.tuples(
    st.sampled_from(["text", "text", "text", "none", "empty", "int", "raise"]),
    _text,
    st.integers(-3, 5),
    st.one_of(st.none(), st.just(0), st.integers(-2, 30)),
    st.one_of(st.none(), st.just("cache cold")),
)


def _build(cls, scenario, budget):
    reg = cls(budget=budget)
    for i, (kind, text, priority, cap, degraded) in enumerate(scenario):
        value = {"text": text, "none": None, "empty": "", "int": 7, "raise": None}[kind]
        reg.register(Scripted(f"p{i % 4}", kind, value, degraded), priority=priority,
                     max_tokens=cap)
    return reg


def _lists(report):
    return (report.blocks, report.fired, report.skipped, report.failed, report.degraded)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_provider, max_size=8), st.integers(-5, 80))
def test_lionctx_registry_equals_lionagi_registry(scenario, budget):
    ours = _build(ContextProviderRegistry, scenario, budget)
    theirs = _build(lionagi_registry.ContextProviderRegistry, scenario, budget)

    async def both():
        for _ in range(2):
            mine, real = await ours.gather(None, "q"), await theirs.gather(None, "q")
            assert _lists(mine) == _lists(real)
        assert ours.stats == theirs.stats

    anyio.run(both)

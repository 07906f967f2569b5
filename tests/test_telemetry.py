"""OpenTelemetry spans and metrics, with the real SDK's in-memory exporters."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import anyio
import pytest
from lionctx import (
    Breakers,
    ContextProviderRegistry,
    SourceUnavailable,
    resolve_context,
    telemetry,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

pytestmark = pytest.mark.anyio

SECRET = "SECRET-PROVIDER-TEXT-7f3a"


@pytest.fixture
def otel():
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    telemetry.configure(tracer_provider=tp, meter_provider=mp)
    telemetry.set_enabled(True)
    yield tp, exporter, reader
    telemetry.configure()
    telemetry.set_enabled(None)


class Text:
    def __init__(self, name, text, delay=0.0):
        self.name, self.text, self.delay = name, text, delay

    async def provide(self, branch, instruction):
        await anyio.sleep(self.delay)
        return self.text

    async def fetch(self, query, ctx):
        return await self.provide(None, None)


class Down:
    name = "down"

    async def provide(self, branch, instruction):
        raise SourceUnavailable("GET http://user:pw@127.0.0.1:9/status?token=abc123 failed")

    async def fetch(self, query, ctx):
        return await self.provide(None, None)


def _values(span):
    yield from (str(v) for v in span.attributes.values())
    for ev in span.events:
        yield from (str(v) for v in ev.attributes.values())
    if span.status.description:
        yield span.status.description


async def test_span_tree_attributes_and_error_status(otel):
    tp, exporter, _ = otel
    reg = ContextProviderRegistry(budget=100, concurrent=True)
    reg.register(Text("notes", SECRET + " notes", 0.05), priority=2)
    reg.register(Text("profile", SECRET + " profile", 0.05))
    reg.register(Down())
    report = await reg.gather(None, None)
    spans = exporter.get_finished_spans()
    parents = [s for s in spans if s.name == "lionctx.gather"]
    children = [s for s in spans if s.name == "lionctx.provider"]
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert parent.attributes["lionctx.face"] == "lionagi"
    assert parent.attributes["lionctx.budget"] == 100
    assert parent.attributes["lionctx.tokens.used"] == report.used_tokens > 0
    for c in children:
        assert c.parent.span_id == parent.context.span_id
        assert c.context.trace_id == parent.context.trace_id
        assert parent.start_time <= c.start_time <= c.end_time <= parent.end_time
    by = {c.attributes["lionctx.provider.name"]: c for c in children}
    assert by["notes"].attributes["lionctx.provider.status"] == "fired"
    assert by["notes"].attributes["lionctx.provider.tokens"] == report.outcomes[0].tokens
    assert by["notes"].attributes["lionctx.provider.digest"] == report.outcomes[0].digest
    # concurrent providers overlap as they ran
    assert by["notes"].start_time < by["profile"].end_time
    assert by["profile"].start_time < by["notes"].end_time
    down = by["down"]
    assert down.status.status_code is StatusCode.ERROR
    assert down.attributes["lionctx.provider.status"] == "failed"
    assert [e.name for e in down.events] == ["exception"]
    assert down.events[0].attributes["exception.type"] == "SourceUnavailable"
    assert by["notes"].status.status_code is StatusCode.UNSET
    for s in spans:
        for v in _values(s):
            assert SECRET not in v
            assert "token" not in v and "abc123" not in v and "pw@" not in v


async def test_sequential_spans_follow_each_other(otel):
    _, exporter, _ = otel
    reg = ContextProviderRegistry()
    reg.register(Text("a", "x", 0.03))
    reg.register(Text("b", "y", 0.03))
    await reg.gather(None, None)
    a, b = sorted((s for s in exporter.get_finished_spans() if s.name == "lionctx.provider"),
                  key=lambda s: s.start_time)
    assert a.attributes["lionctx.provider.name"] == "a"
    assert a.end_time <= b.start_time


async def test_nests_under_the_callers_span_and_records_cache_break(otel):
    tp, exporter, _ = otel
    box = Text("status", "up")
    reg = ContextProviderRegistry()
    reg.register(box)
    with tp.get_tracer("host").start_as_current_span("agent turn") as host:
        await reg.gather(None, None)
        box.text = "down"
        await reg.gather(None, None)
    gathers = [s for s in exporter.get_finished_spans() if s.name == "lionctx.gather"]
    assert len(gathers) == 2
    assert all(g.parent.span_id == host.get_span_context().span_id for g in gathers)
    assert "lionctx.prefix.stable" not in gathers[0].attributes
    assert gathers[1].attributes["lionctx.prefix.stable"] is False
    assert gathers[1].attributes["lionctx.cache_break.name"] == "status"
    assert gathers[1].attributes["lionctx.cache_break.kind"] == "changed"


async def test_breaker_and_timeout_are_visible_in_spans(otel):
    _, exporter, _ = otel

    class Slow:
        name = "slow"

        async def fetch(self, query, ctx):
            await anyio.sleep(5)

    slow = Slow()
    board = Breakers()
    for _ in range(4):
        await resolve_context([slow], "q", timeout=0.02, breaker=board)
    kids = [s for s in exporter.get_finished_spans() if s.name == "lionctx.provider"]
    assert [k.attributes["lionctx.provider.status"] for k in kids] == [
        "timeout", "timeout", "timeout", "skipped"]
    assert kids[0].status.status_code is StatusCode.ERROR
    assert kids[0].attributes["error.type"] == "timeout"
    assert kids[3].attributes["lionctx.provider.circuit"] == "open"
    assert kids[3].attributes["lionctx.provider.skip_cause"] == "circuit_open"
    assert kids[3].status.status_code is StatusCode.UNSET


async def test_metrics_count_outcomes_tokens_and_duration(otel):
    _, _, reader = otel
    reg = ContextProviderRegistry()
    reg.register(Text("a", "one two three"))
    reg.register(Text("e", None))
    report = await reg.gather(None, None)
    await reg.gather(None, None)
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    outcomes = {(p.attributes["lionctx.provider.name"], p.attributes["lionctx.provider.status"]):
                p.value for p in metrics["lionctx.provider.outcomes"].data.data_points}
    assert outcomes == {("a", "fired"): 2, ("e", "empty"): 2}
    tokens = {p.attributes["lionctx.provider.name"]: p.value
              for p in metrics["lionctx.tokens.injected"].data.data_points}
    assert tokens == {"a": 2 * report.outcomes[0].tokens}
    hist = metrics["lionctx.provider.duration"].data.data_points
    assert sum(p.count for p in hist) == 4


async def test_disabled_records_nothing(otel):
    _, exporter, _ = otel
    telemetry.set_enabled(False)
    reg = ContextProviderRegistry()
    reg.register(Text("a", "x"))
    await reg.gather(None, None)
    assert exporter.get_finished_spans() == ()


def test_scrub_cuts_query_strings_and_credentials():
    s = telemetry.scrub("fetch https://u:p@h.example/a/b?key=1&x=2#frag then http://h/?q=1 done")
    assert s == "fetch https://h.example/a/b then http://h/ done"
    assert len(telemetry.scrub("x" * 10_000)) <= 503


@pytest.mark.parametrize("setup", [
    "import sys; sys.modules['opentelemetry'] = None",  # as if not installed
    "import os; os.environ['LIONCTX_OTEL'] = '0'",
])
def test_without_otel_nothing_is_imported_and_passes_work(setup):
    code = textwrap.dedent(f"""
        {setup}
        import sys, anyio
        from lionctx import ContextProviderRegistry, telemetry

        class P:
            name = "p"
            async def provide(self, b, i):
                return "text"

        reg = ContextProviderRegistry()
        reg.register(P())
        report = anyio.run(reg.gather, None, None)
        assert report.blocks == ["text"], report
        assert not telemetry.enabled()
        loaded = [m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m]]
        assert not loaded, loaded
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_importing_lionctx_loads_no_opentelemetry_even_when_installed():
    code = ("import sys, lionctx, agentium_compat, lionctx.telemetry, lionctx._pass; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_liveness_is_asked_again_only_after_the_recheck_interval(monkeypatch):
    # Asking OpenTelemetry's globals reads the environment: not on every pass.
    telemetry.configure()
    telemetry.set_enabled(True)
    try:
        asked = []
        real = telemetry._global_live
        monkeypatch.setattr(telemetry, "_global_live", lambda: asked.append(1) or real())
        now = [1000.0]
        monkeypatch.setattr(telemetry.time, "monotonic", lambda: now[0])
        assert telemetry.live() is False and len(asked) == 1
        for _ in range(100):
            assert telemetry.live() is False
        assert len(asked) == 1  # within the interval: the cached answer
        now[0] += telemetry.LIVE_RECHECK_S + 0.01
        telemetry.live()
        assert len(asked) == 2  # past it: asked again
        tp = TracerProvider()
        telemetry.configure(tracer_provider=tp)  # a provider given here counts at once
        assert telemetry.live() is True
    finally:
        telemetry.configure()
        telemetry.set_enabled(None)

"""Shared pieces for the attacks: a model on the bundled local server, a provider of
fixed text, and an event that releases stuck worker threads at teardown."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from lionctx import OpenAIChatModel, _threads, count_tokens


@pytest.fixture(autouse=True)
def _tokenizer_loaded():
    # The first count in a process loads the encoding (most of a second on a busy
    # machine): never inside an attack's wall clock.
    count_tokens("load the encoding before any wall clock starts")


@pytest.fixture
def model(server):
    return OpenAIChatModel("test-model", base_url=server.base_url, api_key="k", max_retries=0)


@pytest.fixture
def agent_model(server):
    """agentium's ``openai()`` model on the local server, for an ``Agent``; closed after."""
    from agentium_compat import openai

    m = openai("gpt-4o", base_url=server.base_url, api_key="k", max_retries=0)
    yield m
    m.close()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event stuck work waits on; set at teardown, then abandoned threads drain.

    Abandoned worker threads outlive their test; letting them finish here keeps one
    test's stuck threads from counting against the next test's sources.
    """
    event = threading.Event()
    yield event
    event.set()
    until = time.monotonic() + 10
    while _threads.stats()["abandoned"] and time.monotonic() < until:
        time.sleep(0.01)


class Static:
    """A provider of both shapes that returns fixed text."""

    def __init__(self, name, text):
        self.name = name
        self.text = text

    async def provide(self, branch, instruction):
        return self.text

    async def fetch(self, query, ctx):
        return self.text


@pytest.fixture
def otel():
    """The real OpenTelemetry SDK with in-memory exporters: ``(spans, metrics reader)``."""
    from lionctx import telemetry
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    telemetry.configure(tracer_provider=tp, meter_provider=MeterProvider(metric_readers=[reader]))
    telemetry.set_enabled(True)
    yield exporter, reader
    telemetry.configure()
    telemetry.set_enabled(None)

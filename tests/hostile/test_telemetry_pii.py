"""Personal data and credentials never reach a span or a metric, and metric labels
stay a bounded set, with the real OpenTelemetry SDK and its in-memory exporters.

Attacked: exception messages that quote an e-mail address, a DSN with its password
(URL and keyword forms), a bearer token, key-like strings; the same secrets in an
exception's ``args``, in its ``__cause__``, across the cut of a long message; a
provider name per user (2,000 users) and names with control characters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, SourceUnavailable, resolve_context, telemetry
from lionctx.providers import HttpContextProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.providers.http_server import LoopbackServer

pytestmark = pytest.mark.anyio

EMAIL = "jane.doe+crm@example-corp.co.uk"
DSN_PASSWORD = "Hunter2-Pg-Pass"
BEARER = "tok.abcDEF-ghi_jkl"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
OPENAI_KEY = "sk-proj-QwErTyUiOpAsDfGhJkLz"
RANDOM_KEY = "f3a9c2e17b4d8a6053e9b1c7d2f4a8e6"
KV_SECRET = "s3cr3t-Value"

MESSAGES = {
    "email": f"no CRM row for {EMAIL}",
    "dsn-url": f"could not connect to postgresql://app:{DSN_PASSWORD}@db.internal:5432/crm",
    "dsn-keywords": f"connect failed: host=db.internal user=app password={DSN_PASSWORD}",
    "bearer": f"401 from upstream, sent Authorization: Bearer {BEARER}",
    "aws-key": f"S3 refused access key {AWS_KEY}",
    "openai-key": f"invalid api key {OPENAI_KEY} given",
    "random-key": f"HMAC mismatch for {RANDOM_KEY}",
    "json-secret": f'bad config {{"client_secret": "{KV_SECRET}"}}',
}
SECRETS = {
    "email": EMAIL, "dsn-url": DSN_PASSWORD, "dsn-keywords": DSN_PASSWORD, "bearer": BEARER,
    "aws-key": AWS_KEY, "openai-key": OPENAI_KEY, "random-key": RANDOM_KEY,
    "json-secret": KV_SECRET,
}


def _span_text(exporter) -> str:
    parts = []
    for span in exporter.get_finished_spans():
        parts += [span.name, str(dict(span.attributes)), str(span.status.description)]
        parts += [str(dict(e.attributes)) for e in span.events]
    return "\n".join(parts)


def _points(reader, metric: str):
    data = reader.get_metrics_data()
    return [p for rm in data.resource_metrics for sm in rm.scope_metrics
            for m in sm.metrics if m.name == metric for p in m.data.data_points]


def _everything(exporter, reader) -> str:
    parts = [_span_text(exporter)]
    for name in ("lionctx.provider.outcomes", "lionctx.tokens.injected",
                 "lionctx.provider.duration"):
        parts += [str(dict(p.attributes)) for p in _points(reader, name)]
    return "\n".join(parts)


class Raising:
    def __init__(self, name, exc):
        self.name, self.exc = name, exc

    async def provide(self, branch, instruction):
        raise self.exc

    async def fetch(self, query, ctx):
        raise self.exc


class Static:
    def __init__(self, name, text="text"):
        self.name, self.text = name, text

    async def provide(self, branch, instruction):
        return self.text

    async def fetch(self, query, ctx):
        return self.text


def _fragments(secret: str, size: int = 8):
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


# -- exception messages ----------------------------------------------------------------

@pytest.mark.parametrize("kind", list(MESSAGES))
@pytest.mark.parametrize("exc_type", [SourceUnavailable, ConnectionError])
async def test_a_secret_in_an_exception_message_never_reaches_a_span(otel, kind, exc_type):
    exporter, reader = otel
    reg = ContextProviderRegistry()
    reg.register(Raising("crm", exc_type(MESSAGES[kind])))
    await reg.gather(None, None)
    await resolve_context([Raising("crm2", exc_type(MESSAGES[kind]))], "q", breaker=False)
    dump = _everything(exporter, reader)
    assert exc_type.__name__ in dump, "the failure itself is recorded"
    assert SECRETS[kind] not in dump
    # What is not personal stays readable.
    words = {"email": "no CRM row", "dsn-url": "db.internal", "dsn-keywords": "host=db.internal",
             "bearer": "401 from upstream", "aws-key": "S3 refused", "openai-key": "given",
             "random-key": "HMAC mismatch", "json-secret": "bad config"}
    assert words[kind] in dump


async def test_every_secret_at_once_in_one_message(otel):
    exporter, reader = otel
    message = " ; ".join(MESSAGES.values())
    await resolve_context([Raising("all", RuntimeError(message))], "q", breaker=False)
    dump = _everything(exporter, reader)
    assert "RuntimeError" in dump
    for secret in SECRETS.values():
        assert secret not in dump


# -- from other sides: args, cause, the cut, the name ---------------------------------------

async def test_secrets_in_an_exceptions_args_never_reach_a_span(otel):
    exporter, reader = otel
    exc = ValueError("lookup failed", {"user": EMAIL, "dsn": f"mysql://u:{DSN_PASSWORD}@h/db"},
                     ("Bearer", BEARER), AWS_KEY)
    await resolve_context([Raising("args", exc)], "q", breaker=False)
    dump = _everything(exporter, reader)
    assert "lookup failed" in dump
    for secret in (EMAIL, DSN_PASSWORD, AWS_KEY):
        assert secret not in dump


async def test_a_secret_in_the_cause_never_reaches_a_span(otel):
    exporter, reader = otel

    class Chained:
        name = "chained"

        async def fetch(self, query, ctx):
            try:
                raise ConnectionError(f"postgresql://app:{DSN_PASSWORD}@db/crm for {EMAIL}")
            except ConnectionError as exc:
                raise SourceUnavailable("database unavailable") from exc

    await resolve_context([Chained()], "q", breaker=False)
    dump = _everything(exporter, reader)
    assert "database unavailable" in dump
    assert DSN_PASSWORD not in dump and EMAIL not in dump


@pytest.mark.parametrize("offset", range(-40, 41, 4))
async def test_a_secret_across_the_cut_leaves_no_fragment(otel, offset):
    exporter, reader = otel
    # The reason's prefix ("RuntimeError: ") puts the cut near here in the span text.
    filler = "word " * ((telemetry.MESSAGE_CHARS + offset) // 5)
    for secret, message in ((RANDOM_KEY, f"{filler}{RANDOM_KEY} tail"),
                            (DSN_PASSWORD, f"{filler}pg://u:{DSN_PASSWORD}@h/db tail"),
                            (EMAIL, f"{filler}{EMAIL} tail")):
        await resolve_context([Raising("cut", RuntimeError(message + " more" * 400))], "q",
                              breaker=False)
        dump = _span_text(exporter)
        leaked = [f for f in _fragments(secret) if f in dump]
        assert not leaked, (secret, leaked)


@pytest.mark.parametrize("inside", [3, 8, 16, 24, 30])
async def test_a_secret_across_the_scrubbed_window_leaves_no_fragment(otel, inside):
    # Query strings are taken out, so the scrubbed text is short: the edge of what
    # was read (not the final cut) is what ends the span text. A secret across that
    # edge must not show its first half.
    from lionctx.providers._redact import _MARGIN

    exporter, _ = otel
    edge = telemetry.MESSAGE_CHARS + _MARGIN - len("RuntimeError: ")
    head = "GET https://api.example/v1?" + "q=1&" * 300
    head = head[:edge - inside - 1] + " "
    for secret, written in ((RANDOM_KEY, RANDOM_KEY), (EMAIL, EMAIL),
                            (DSN_PASSWORD, f"pg://u:{DSN_PASSWORD}@db/crm")):
        message = head + written + " tail" * 100
        await resolve_context([Raising("edge", RuntimeError(message))], "q", breaker=False)
        dump = _span_text(exporter)
        assert "api.example/v1" in dump
        leaked = [f for f in _fragments(secret, 6) if f in dump and f not in head]
        assert not leaked, (secret, leaked)


async def test_a_name_carrying_an_email_is_scrubbed_in_spans_and_labels(otel):
    exporter, reader = otel
    name = f"crm/users/{EMAIL}/notes"
    await resolve_context([Static(name)], "q", breaker=False)
    dump = _everything(exporter, reader)
    assert EMAIL not in dump
    labels = {p.attributes["lionctx.provider.name"]
              for p in _points(reader, "lionctx.provider.outcomes")}
    # "/" is part of an address's local part (RFC 5322), so the path before it goes
    # with it: over-masking costs readability, never privacy.
    assert labels == {"[email]/notes"}


# -- metric labels ---------------------------------------------------------------------

async def test_a_provider_name_per_user_gives_a_bounded_label_set(otel):
    _, reader = otel
    for user in range(2000):
        await resolve_context([Static(f"profile/u{user:05d}"), Static("weather")], "q",
                              breaker=False)
    labels = {p.attributes["lionctx.provider.name"]
              for p in _points(reader, "lionctx.provider.outcomes")}
    assert len(labels) == telemetry.MAX_LABEL_VALUES + 1
    assert "weather" in labels and telemetry.OVERFLOW_LABEL in labels
    points = _points(reader, "lionctx.provider.outcomes")
    assert sum(p.value for p in points) == 4000  # every outcome is still counted
    over = [p for p in points if p.attributes["lionctx.provider.name"] == telemetry.OVERFLOW_LABEL]
    assert sum(p.value for p in over) == 2000 - (telemetry.MAX_LABEL_VALUES - 1)


async def test_http_providers_named_from_per_user_urls_share_the_overflow_label(otel):
    _, reader = otel
    telemetry.configure(tracer_provider=None, meter_provider=MeterProvider(
        metric_readers=[reader2 := InMemoryMetricReader()]), max_label_values=10)
    with LoopbackServer() as srv:
        providers = [HttpContextProvider(srv.url(f"/users/{i}/ok"), timeout=5)
                     for i in range(40)]
        try:
            for p in providers:
                await resolve_context([p], "q", breaker=False)
        finally:
            for p in providers:
                await p.aclose()
    labels = {p.attributes["lionctx.provider.name"]
              for p in _points(reader2, "lionctx.provider.outcomes")}
    assert len(labels) == 11 and telemetry.OVERFLOW_LABEL in labels


@pytest.mark.parametrize("name", [
    pytest.param("evil\nname\x1b[31m\u202eRTL\u200b", id="control-bidi-zero-width"),
    pytest.param("n" * 100_000, id="100k-chars"),
    pytest.param("\r\n" * 50, id="only-newlines"),
])
async def test_a_hostile_name_is_a_printable_bounded_label(otel, name):
    exporter, reader = otel
    await resolve_context([Static(name)], "q", breaker=False)
    (label,) = {p.attributes["lionctx.provider.name"]
                for p in _points(reader, "lionctx.provider.outcomes")}
    assert 0 < len(label) <= telemetry.LABEL_CHARS
    assert label.isprintable()
    spans = [s for s in exporter.get_finished_spans() if s.name == "lionctx.provider"]
    shown = spans[0].attributes["lionctx.provider.name"]
    assert len(shown) <= telemetry.NAME_CHARS and shown.isprintable()


@settings(max_examples=50, deadline=None)
@given(named=st.lists(st.one_of(st.text(max_size=300).map(lambda t: (t, False)),
                                st.emails().map(lambda e: (f"crm/{e}/notes", e))),
                      min_size=1, max_size=60),
       cap=st.integers(1, 20))
def test_labels_of_any_names_are_printable_bounded_and_few(named, cap):
    names = [n for n, _ in named]
    telemetry.configure(max_label_values=cap)
    try:
        labels = [telemetry.metric_label(n) for n in names]
        assert all(0 < len(label) <= telemetry.LABEL_CHARS and label.isprintable()
                   for label in labels)
        assert len(set(labels) - {telemetry.OVERFLOW_LABEL}) <= cap
        for (_, email), label in zip(named, labels, strict=True):
            assert not email or email not in label
        # The same name always gets the same label.
        assert [telemetry.metric_label(n) for n in names] == labels
    finally:
        telemetry.configure()


def test_the_label_cap_is_checked_where_it_is_set():
    from lionctx import InvalidValue

    with pytest.raises(InvalidValue, match="max_label_values"):
        telemetry.configure(max_label_values=0)

"""Secrets and provider text never reach an OpenTelemetry span or metric:
not from an HTTP provider's URL query or headers when it fails or times out, not
from an exception message that quotes a URL, not from the text a provider returns."""

from __future__ import annotations

import pytest
from lionctx import ContextProviderRegistry, resolve_context
from lionctx.providers import HttpContextProvider

from tests.providers.http_server import LoopbackServer

pytestmark = pytest.mark.anyio

QUERY_SECRET = "qs-s3cr3t-in-the-query"
HEADER_SECRET = "hdr-s3cr3t-bearer"
TEXT_SECRET = "provider-text-s3cr3t"
USERINFO_SECRET = "pw-s3cr3t"


def _everything(exporter, reader) -> str:
    parts = []
    for span in exporter.get_finished_spans():
        parts += [span.name, str(dict(span.attributes)), str(span.status.description)]
        parts += [str(dict(e.attributes)) for e in span.events]
    data = reader.get_metrics_data()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                parts += [str(dict(p.attributes)) for p in m.data.data_points]
    return "\n".join(parts)


class Leaky:
    """Returns secret text, or raises with a URL that carries secrets."""

    def __init__(self, name, fail):
        self.name, self.fail = name, fail

    async def provide(self, branch, instruction):
        if self.fail:
            raise ConnectionError(f"GET https://svc:{USERINFO_SECRET}@api.example/v1?"
                                  f"key={QUERY_SECRET}#x failed")
        return f"profile: {TEXT_SECRET}"

    async def fetch(self, query, ctx):
        return await self.provide(None, None)


@pytest.mark.parametrize("path", ["/status/500", "/slow?s=5", "/ok"])
async def test_http_provider_secrets_stay_out_of_spans(otel, path):
    exporter, reader = otel
    with LoopbackServer() as srv:
        sep = "&" if "?" in path else "?"
        provider = HttpContextProvider(srv.url(f"{path}{sep}token={QUERY_SECRET}"),
                                       name="status", timeout=5,
                                       headers={"Authorization": f"Bearer {HEADER_SECRET}"})
        try:
            reg = ContextProviderRegistry(timeout=0.3)
            reg.register(provider)
            report = await reg.gather(None, None)
            await resolve_context([provider], "q", timeout=0.3, breaker=False)
        finally:
            await provider.aclose()
    assert report.outcomes
    dump = _everything(exporter, reader)
    assert "lionctx.provider" in dump
    assert QUERY_SECRET not in dump and HEADER_SECRET not in dump


async def test_exception_messages_and_provider_text_stay_out(otel):
    exporter, reader = otel
    reg = ContextProviderRegistry(concurrent=True)
    reg.register(Leaky("profile", fail=False))
    reg.register(Leaky("crm", fail=True))
    await reg.gather(None, None)
    await resolve_context([Leaky("a", False), Leaky("b", True)], "q", breaker=False)
    dump = _everything(exporter, reader)
    assert "ConnectionError" in dump, "the failure itself is recorded"
    for secret in (QUERY_SECRET, TEXT_SECRET, USERINFO_SECRET):
        assert secret not in dump

"""Two tenants' turns at once in one process, traced by one OpenTelemetry provider:
each pass's spans sit under its own caller's span, and one tenant's ids (in a failure
message, a reason) never appear in the other's spans; metric labels name providers,
never a user."""

from __future__ import annotations

import anyio
import pytest
from lionctx import Breakers, BreakerSettings, RunContext, resolve_context

from tests.fakes import Clock

pytestmark = pytest.mark.anyio

USERS = {"tenant-a": "alice-7f3", "tenant-b": "bob-91c"}


class Profile:
    """Fails for one user with a message naming that user; answers the others."""

    name = "profile"
    context_fields = ("user_id", "tenant_id")

    async def fetch(self, query, ctx):
        await anyio.sleep(0.01)  # both tenants' passes are in flight at once
        if ctx.user_id == USERS["tenant-b"]:
            raise LookupError(f"no profile for {ctx.user_id}")
        return f"profile of {ctx.user_id}"


def _subtree(spans, root):
    ids = {root.context.span_id}
    grew = True
    while grew:
        grew = False
        for s in spans:
            if s.parent is not None and s.parent.span_id in ids and s.context.span_id not in ids:
                ids.add(s.context.span_id)
                grew = True
    return [s for s in spans if s.context.span_id in ids and s is not root]


def _text(spans) -> str:
    parts = []
    for s in spans:
        parts += [s.name, str(dict(s.attributes)), str(s.status.description)]
        parts += [str(dict(e.attributes)) for e in s.events]
    return "\n".join(parts)


async def test_each_tenants_spans_are_its_own(otel):
    from lionctx import telemetry

    exporter, reader = otel
    tracer = telemetry._state["tracer_provider"].get_tracer("host")
    source = Profile()
    board = Breakers(BreakerSettings(threshold=1), clock=Clock())

    async def turn(tenant):
        with tracer.start_as_current_span(f"request {tenant}"):
            for _ in range(3):
                await resolve_context([source], "q", RunContext(
                    user_id=USERS[tenant], tenant_id=tenant), breaker=board)

    async with anyio.create_task_group() as tg:
        for tenant in USERS:
            tg.start_soon(turn, tenant)
    spans = exporter.get_finished_spans()
    for tenant in USERS:
        [root] = [s for s in spans if s.name == f"request {tenant}"]
        mine = _subtree(spans, root)
        assert [s.name for s in mine].count("lionctx.gather") == 3, "its own passes only"
        other = next(u for t, u in USERS.items() if t != tenant)
        assert other not in _text(mine)
    b_text = _text(_subtree(spans, next(s for s in spans if s.name == "request tenant-b")))
    assert "no profile for bob-91c" in b_text, "the failing tenant sees its own failure"
    a_rows = _text(_subtree(spans, next(s for s in spans if s.name == "request tenant-a")))
    assert "circuit" not in a_rows, "tenant b's open circuit is not tenant a's"
    data = reader.get_metrics_data()
    labels = {str(dict(p.attributes)) for rm in data.resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics for p in m.data.data_points}
    assert labels and not any(u in label for u in USERS.values() for label in labels)

"""A default per-provider timeout on the agentium face and ``Agent`` (10 s, documented;
``timeout=None`` for none); the LionAGI face keeps LionAGI's default of none.

The hung sources sleep on trio's virtual clock (``MockClock`` with autojump): when
nothing else can run, the clock jumps to the next deadline, so a 10 s cut and an hour's
wait cost no real time, and nothing here reads a real clock.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from agentium_compat import Agent, openai, resolve_context, resolveContextProviders
from lionctx import ContextProviderRegistry, Status
from lionctx.resolve import DEFAULT_TIMEOUT
from lionctx.testing import LocalOpenAIServer
from trio.testing import MockClock

HOUR = 3600.0


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    # A real socket wait longer than a second would let the clock jump past a
    # model call's own timeout: the threshold keeps jumps to idle providers.
    return ("trio", {"clock": MockClock(autojump_threshold=1.0)})


class Hung:
    """A source that answers after an hour (of the event loop's clock)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.finished = False
        self.cancelled = False

    async def fetch(self, query: str, ctx: Any) -> str:
        try:
            await anyio.sleep(HOUR)
        except anyio.get_cancelled_exc_class():
            self.cancelled = True  # cut by a limit, not left running
            raise
        self.finished = True
        return "late"


class Quick:
    name = "quick"

    async def fetch(self, query: str, ctx: Any) -> str:
        return "in time"


def test_the_default_is_documented_and_at_most_ten_seconds() -> None:
    assert DEFAULT_TIMEOUT == 10.0
    assert Agent(name="a", model=openai("m", {"baseURL": "http://127.0.0.1:9"})
                 ).context_timeout == DEFAULT_TIMEOUT


@pytest.mark.anyio
async def test_resolve_cuts_a_hung_source_at_the_default() -> None:
    hung = Hung("hung")
    res = await resolve_context([hung, Quick()], "q")
    # Cause, not a clock: the source was cancelled, and the row names the default.
    assert hung.cancelled and not hung.finished
    assert [o.status for o in res.outcomes] == [Status.TIMEOUT, Status.FIRED]
    assert res.outcomes[0].reason == "timed out after 10s"
    assert not hung.finished
    assert res.text == '<context name="quick">\nin time\n</context>'


@pytest.mark.anyio
async def test_timeout_none_waits_for_the_source() -> None:
    hung = Hung("hung")
    text = await resolveContextProviders([hung], "q", None, timeout=None)
    assert hung.finished and text == '<context name="hung">\nlate\n</context>'
    shorter = await resolve_context([Hung("h")], "q", timeout=2)
    assert shorter.outcomes[0].reason == "timed out after 2s"


@pytest.mark.anyio
async def test_an_agent_cuts_a_hung_source_at_the_default() -> None:
    with LocalOpenAIServer() as server:
        model = openai("m", {"baseURL": server.base_url, "apiKey": "k", "maxRetries": 0})
        agent = Agent(name="a", model=model, contextProviders=[Hung("hung"), Quick()])
        result = await agent.run("q")
        assert result.contextReport is not None
        assert [o.status for o in result.contextReport.outcomes] == [Status.TIMEOUT,
                                                                    Status.FIRED]
        assert "in time" in server.requests[-1]["messages"][0]["content"]
        patient = Agent(name="b", model=model, contextProviders=[Hung("hung")],
                        contextTimeout=None)  # type: ignore[call-arg]  # camelCase: the decorator
        result = await patient.run("q")
        assert result.contextReport is not None
        assert result.contextReport.outcomes[0].status is Status.FIRED
        model.close()


@pytest.mark.anyio
async def test_the_lionagi_face_keeps_no_default_timeout() -> None:
    reg = ContextProviderRegistry()
    assert reg.timeout is None
    reg.register(Hung("hung"))
    report = await reg.gather(SimpleNamespace(run_context=None), "q")
    assert [f["provider_name"] for f in report.fired] == ["hung"]

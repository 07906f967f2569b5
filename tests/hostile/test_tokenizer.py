"""Attacks on token counting: a text that makes the tokenizer panic, a counter that
raises the caller's BaseExceptions, and the one-time load reported apart."""

import json
import subprocess
import sys
import textwrap

import pytest
from agentium_compat import Agent, openai
from lionctx import Branch, ContextProviderRegistry, Status, resolve_context

from .conftest import Static

pytestmark = pytest.mark.anyio

# tiktoken's split regex overflows its stack on a long run of spaces followed by text:
# pyo3 raises PanicException, a BaseException, not an Exception.
PANIC = " " * 1_000_000 + "a line of text\n"


@pytest.fixture
def uncut_counted(monkeypatch):
    """In a turn, a run this long with no place to cut is refused before the tokenizer
    sees it; raising that cap lets the panic through, so containment is what holds."""
    import lionctx._tokens

    monkeypatch.setattr(lionctx._tokens, "MAX_UNCUT", 2 * len(PANIC))


def _panics():
    from lionctx._tokens import get_encoding

    try:
        get_encoding().encode_ordinary(PANIC)
    except BaseException as exc:  # noqa: BLE001 - the point of the check
        return not isinstance(exc, Exception)
    return False


async def test_the_text_really_panics_the_tokenizer():
    # Guards the attack itself: if tiktoken stops panicking, the tests below still
    # pass, and this one says the attack needs renewing.
    assert _panics()


@pytest.mark.parametrize("concurrent", [False, True])
async def test_registry_contains_a_tokenizer_panic(concurrent, uncut_counted):
    # Counted even under a size limit above it: containment, not the limit, holds.
    reg = ContextProviderRegistry(budget=10_000_000, concurrent=concurrent,
                                  max_chars=2_000_000)
    reg.register(Static("bomb", PANIC))
    reg.register(Static("fine", "plain notes"))
    report = await reg.gather(None, "q")
    bomb, fine = report.outcomes
    assert bomb.status is Status.FAILED
    assert bomb.reason.startswith("token counting failed: PanicException")
    assert fine.status is Status.FIRED and report.blocks == ["plain notes"]
    assert report.failed == ["bomb"]


async def test_resolve_contains_a_tokenizer_panic(uncut_counted):
    res = await resolve_context([Static("bomb", PANIC), Static("fine", "ok")], "q",
                                max_chars=2_000_000)
    assert [o.status for o in res.outcomes] == [Status.FAILED, Status.FIRED]
    assert "PanicException" in res.outcomes[0].reason
    assert res.text == '<context name="fine">\nok\n</context>'


async def test_branch_chat_survives_a_tokenizer_panic(server, model):
    branch = Branch("sys", model)
    branch.providers.budget = 10_000_000
    branch.providers.register(Static("bomb", PANIC), max_chars=2_000_000)
    branch.providers.register(Static("fine", "ok"))
    await branch.chat("q")
    system = server.requests[-1]["messages"][0]["content"]
    assert system == 'sys\n\n<context name="fine">\nok\n</context>'
    assert branch.last_context_report.failed == ["bomb"]


async def test_by_default_it_is_counted_and_contained(uncut_counted):
    res = await resolve_context([Static("bomb", PANIC)], "q")
    (bomb,) = res.outcomes
    assert bomb.status is Status.FAILED and "PanicException" in bomb.reason


async def test_by_default_a_turn_refuses_it_before_the_tokenizer():
    res = await resolve_context([Static("bomb", PANIC), Static("fine", "ok")], "q")
    bomb, fine = res.outcomes
    assert bomb.status is Status.FAILED and "PanicException" not in bomb.reason
    assert "no place to cut the token count" in bomb.reason
    assert fine.status is Status.FIRED


async def test_a_lower_size_limit_skips_it_uncounted():
    res = await resolve_context([Static("bomb", PANIC)], "q", max_chars=500_000)
    (bomb,) = res.outcomes
    assert bomb.status is Status.SKIPPED_SIZE and bomb.tokens == 0
    assert bomb.reason == f"{len(PANIC)} characters over the size limit of 500000"


async def test_agent_run_survives_a_tokenizer_panic(server):
    agent = Agent(name="a", model=openai("m", base_url=server.base_url, api_key="k",
                                         max_retries=0),
                  instructions=lambda c: c.context, context_max_chars=2_000_000,
                  context_providers=[Static("bomb", PANIC), Static("fine", "ok")])
    result = await agent.run("q")
    assert result.output
    assert [o.status for o in result.context_report.outcomes] == [Status.FAILED, Status.FIRED]
    assert server.requests[-1]["messages"][0]["content"] == '<context name="fine">\nok\n</context>'


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
async def test_the_callers_base_exceptions_from_counting_still_propagate(kind):
    def counter(text):
        raise kind()

    reg = ContextProviderRegistry(counter=counter)
    reg.register(Static("a", "text"))
    with pytest.raises(kind):
        await reg.gather(None, "q")


def test_tokenizer_load_is_reported_apart_from_the_pass():
    # A fresh process: the first pass loads the encoding, the second does not. The load
    # is held longer than the provider's timeout: it runs before any provider's timer
    # starts, so it is never charged to a provider (shown by order and by the row, not
    # by a clock).
    code = textwrap.dedent("""
        import anyio, json, threading
        from lionctx import resolve_context
        from lionctx import _tokens as tokens_module

        events = []
        real_load = tokens_module._load_o200k

        def held_load(*args, **kwargs):
            encoding = real_load(*args, **kwargs)
            threading.Event().wait(0.5)  # longer than the provider's timeout
            events.append("loaded")
            return encoding

        tokens_module._load_o200k = held_load

        class P:
            name = "p"
            async def fetch(self, q, c):
                events.append("fetched")
                return "hello"

        async def main():
            first = await resolve_context([P()], "q", timeout=0.2)
            second = await resolve_context([P()], "q", timeout=0.2)
            print(json.dumps([events, first.to_dict(), second.to_dict()]))

        anyio.run(main)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    events, first, second = json.loads(out)
    assert events == ["loaded", "fetched", "fetched"]  # loaded once, before any call
    assert [o["status"] for o in first["outcomes"]] == ["fired"]  # not charged to it
    assert [o["status"] for o in second["outcomes"]] == ["fired"]
    # The first pass carries the load's figure; its size is a benchmark's business.
    assert type(first["tokenizer_load_ms"]) is float
    assert second["tokenizer_load_ms"] == 0.0  # loaded once per process

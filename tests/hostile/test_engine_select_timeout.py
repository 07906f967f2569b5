"""Attack: a context engine whose ``select_context`` hangs (a sync hook that blocks, an
async one that never returns). The turn must go on within the engine's
``select_context_timeout`` with the unselected request, the failure logged like any
other engine failure; a cancellation from outside still cancels.

Driven through lionctx.Branch and agentium_compat.Agent against the local
OpenAI-compatible server, with the real openai client."""

import logging
import math
import threading

import anyio
import anyio.lowlevel
import pytest
from agentium_compat import Agent
from lionctx import Branch, OpenAIChatModel
from lionctx._threads import stats
from lionctx.engines import (
    DEFAULT_SELECT_TIMEOUT,
    ContextEngine,
    clear_registered_context_engine,
    register_context_engine,
    resolve_context_engine,
)
from lionctx.engines._session import EngineSession

SYSTEM = "You are helpful."
HOST = "lionctx.engines.host"
HISTORY = [
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer"},
]
# A blocked hook waits this long unless released. A turn that comes back while the
# hook is still blocked (``finished`` not yet set) did not wait for it: the old
# (unbounded, in-loop) host only came back after the hook did.
HANG = 8.0
TIMEOUT = 0.3


class Engine(ContextEngine):
    def __init__(self):
        self.release = threading.Event()
        self.started = threading.Event()
        self.cancelled = False
        self.finished = False

    @property
    def name(self):
        return "slow-engine"

    def update_from_response(self, usage):
        pass

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None):
        return messages


class BlockingSelect(Engine):
    """A sync hook that blocks its thread, then would select only the last message."""

    def select_context(self, request_messages, *, conversation_messages=None,
                       incoming_message=None, budget_tokens=0):
        self.started.set()
        self.release.wait(HANG)
        self.finished = True
        return [request_messages[0], request_messages[-1]]


class SleepingSelect(Engine):
    """An async hook that awaits forever (until cancelled)."""

    async def select_context(self, request_messages, *, conversation_messages=None,
                             incoming_message=None, budget_tokens=0):
        self.started.set()
        try:
            await anyio.sleep(HANG)
        except BaseException:
            self.cancelled = True
            raise
        self.finished = True
        return [request_messages[0], request_messages[-1]]


class QuickAsyncSelect(Engine):
    async def select_context(self, request_messages, *, conversation_messages=None,
                             incoming_message=None, budget_tokens=0):
        await anyio.lowlevel.checkpoint()
        return [request_messages[0], request_messages[-1]]


@pytest.fixture
def model(server):
    m = OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0, timeout=30)
    yield m
    m.close()


def timeout_warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == HOST and r.levelno == logging.WARNING
            and "did not return" in r.getMessage()]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", [BlockingSelect, SleepingSelect])
async def test_a_hanging_selection_costs_only_the_selection(kind, server, model, caplog):
    caplog.set_level(logging.WARNING, logger=HOST)
    engine = kind()
    engine.select_context_timeout = TIMEOUT
    branch = Branch(SYSTEM, model, messages=HISTORY, context_engine=engine)
    unselected = branch.build_request("second question")
    try:
        reply = await branch.communicate("second question")
        finished_when_back = engine.finished
    finally:
        engine.release.set()  # let an abandoned thread end
    assert engine.started.is_set() and not finished_when_back
    assert server.last_request["messages"] == unselected  # all four messages went out
    assert len(unselected) == 4
    assert reply and [m["content"] for m in branch.messages][-2:] == ["second question", reply]
    (warning,) = timeout_warnings(caplog)
    assert "'slow-engine'" in warning and "0.3s" in warning and "unmodified request" in warning
    if kind is SleepingSelect:
        assert engine.cancelled  # the coroutine was cancelled, not left running


@pytest.mark.anyio
async def test_agent_turn_is_bounded_too(server, caplog):
    from agentium_compat import openai

    caplog.set_level(logging.WARNING, logger=HOST)
    engine = BlockingSelect()
    engine.select_context_timeout = TIMEOUT
    m = openai("gpt-4o", base_url=server.base_url, api_key="k", max_retries=0)
    agent = Agent(name="bot", model=m, instructions=SYSTEM, context_engine=engine)
    try:
        result = await agent.run("second question", messages=HISTORY)
        finished_when_back = engine.finished
    finally:
        engine.release.set()
        m.close()
    assert engine.started.is_set() and not finished_when_back
    sent = server.last_request["messages"]
    assert [x["content"] for x in sent] == [SYSTEM, "first question", "first answer",
                                           "second question"]
    assert result.output and len(timeout_warnings(caplog)) == 1


@pytest.mark.anyio
async def test_an_engine_stuck_again_and_again_never_stalls_a_turn(server, model, caplog):
    caplog.set_level(logging.WARNING)
    engine = BlockingSelect()
    engine.select_context_timeout = 0.2
    branch = Branch(SYSTEM, model, context_engine=engine)
    try:
        for i in range(7):  # past the per-source cap on stuck worker threads
            await branch.communicate(f"q{i}")
        finished_when_back = engine.finished
        assert stats()["abandoned"] >= 1
    finally:
        engine.release.set()
    assert not finished_when_back  # no turn waited for a blocked hook
    assert len(server.requests) == 7
    for body in server.requests:  # every request unselected: system + all history
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert "still stuck" in caplog.text  # the cap turned further calls away at once


@pytest.mark.anyio
async def test_an_outside_cancellation_is_not_swallowed(server, model):
    engine = BlockingSelect()
    engine.select_context_timeout = 30
    branch = Branch(SYSTEM, model, context_engine=engine)
    try:
        with anyio.move_on_after(0.3) as scope:
            await branch.communicate("hi")
        finished_when_back = engine.finished
    finally:
        engine.release.set()
    # Cancelled while the hook still blocked its thread: nobody waited for the hook.
    assert scope.cancelled_caught and not finished_when_back
    assert server.requests == []


@pytest.mark.anyio
async def test_an_async_hook_that_returns_in_time_is_used(server, model):
    branch = Branch(SYSTEM, model, messages=HISTORY, context_engine=QuickAsyncSelect())
    await branch.communicate("second question")
    assert server.last_request["messages"] == [{"role": "system", "content": SYSTEM},
                                              {"role": "user", "content": "second question"}]


@pytest.mark.anyio
async def test_a_sync_hook_in_time_is_used_and_runs_off_the_event_loop():
    loop_thread = threading.get_ident()
    seen = []

    class Quick(Engine):
        def select_context(self, request_messages, **kwargs):
            seen.append(threading.get_ident())
            return request_messages[-1:]

    req = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    out = await EngineSession(Quick()).select(req, conversation=req, incoming=None)
    assert out == req[-1:] and seen and seen[0] != loop_thread


class Copyable(ContextEngine):
    name = "copyable"

    def update_from_response(self, usage):
        pass

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None):
        return messages


def test_default_and_configuration(tmp_path):
    assert DEFAULT_SELECT_TIMEOUT == 10.0
    assert BlockingSelect().select_context_timeout == 10.0
    configured = resolve_context_engine(None, {"context": {"select_context_timeout": 2.5}})
    assert configured.select_context_timeout == 2.5  # the built-in compressor
    file = tmp_path / "lionctx.toml"
    file.write_text('[context]\nselect_context_timeout = 4\n')
    assert resolve_context_engine(None, file).select_context_timeout == 4.0
    clear_registered_context_engine()
    try:
        register_context_engine(Copyable())
        clone = resolve_context_engine("copyable", {"select_context_timeout": 1})
        assert isinstance(clone, Copyable) and clone.select_context_timeout == 1.0
    finally:
        clear_registered_context_engine()


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, True, "5", None])
def test_bad_timeouts_are_refused_naming_the_value(bad):
    engine = BlockingSelect()
    with pytest.raises(ValueError, match="select_context_timeout") as info:
        engine.select_context_timeout = bad
    assert repr(bad) in str(info.value)
    if bad is not None:
        with pytest.raises(ValueError, match="select_context_timeout"):
            resolve_context_engine(None, {"select_context_timeout": bad})


@pytest.mark.anyio
async def test_a_subclass_shadowing_the_timeout_with_junk_gets_the_default(caplog):
    class Junk(BlockingSelect):
        select_context_timeout = "never"

    engine = Junk()
    engine.release.set()  # returns at once: only the bound's value is under test
    req = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    out = await EngineSession(engine).select(req, conversation=req, incoming=None)
    assert out == [req[0], req[-1]]

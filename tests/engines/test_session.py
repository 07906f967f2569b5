"""EngineSession's turn hooks as methods, and SessionPool (an agent's sessions), through
their public methods, with real engines."""

import json
import logging
from collections import OrderedDict

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx._messages import is_uid
from lionctx.engines import ContextEngine
from lionctx.engines._session import EngineSession, SessionPool, open_session

from tests.engines.recording import Plain, Recorder


def request():
    return [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]


@pytest.mark.anyio
async def test_select_is_request_only_and_falls_open():
    rec = Recorder()
    session = EngineSession(rec)
    req = request()
    assert await session.select(req, conversation=req[:1], incoming=req[1]) is req  # None
    rec.selection = lambda r: r[1:]  # drops the system prefix: refused
    assert await session.select(req, conversation=req[:1], incoming=req[1]) is req
    rec.selection = lambda r: [*r, {"role": "assistant", "content": "a"}]
    out = await session.select(req, conversation=req[:1], incoming=req[1])
    assert out == [*req, {"role": "assistant", "content": "a"}] and req == request()
    plain = EngineSession(Plain())
    assert not plain.observes("select_context") and session.observes("select_context")
    assert await plain.select(req, conversation=None, incoming=None) is req


@pytest.mark.anyio
async def test_compress_asks_should_compress_then_compacts_in_a_thread():
    rec = Recorder()
    session = EngineSession(rec)
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "old"}]
    assert await session.compress(history, {"prompt_tokens": 7}) is None  # not due
    assert rec.names() == ["should_compress"] and rec.calls[0][1] == 7
    rec.due = True
    rec.compact = lambda msgs: [msgs[0], {"role": "user", "content": "summary"}]
    out = await session.compress(history, None)
    assert [m["content"] for m in out] == ["s", "summary"] and is_uid(out[1]["message_uid"])
    assert rec.calls[-2] == ("should_compress", None) and rec.names()[-1] == "compress"
    assert history[1]["content"] == "old"  # the given list is never modified
    assert session.compact(history, None, force=True)[1]["content"] == "summary"


def test_after_response_and_turn_complete_get_copies():
    rec = Recorder()
    session = EngineSession(rec)
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    session.after_response(usage)
    session.after_response(None)  # no usage: not reported
    assert rec.calls == [("update_from_response", usage)] and rec.calls[0][1] is not usage
    transcript = request()
    session.turn_complete(transcript, usage, turn_id="t", task_id="r", api_call_count=2,
                          exit_reason="max_rounds")
    _, messages, got, kw = rec.calls[-1]
    assert messages == transcript and messages[0] is not transcript[0]
    assert got == usage and kw == {"turn_id": "t", "task_id": "r", "api_call_count": 2,
                                   "interrupted": False, "failed": False,
                                   "turn_exit_reason": "max_rounds"}


@pytest.mark.anyio
async def test_tools_and_dispatch_tool():
    rec = Recorder()
    rec.tools = [{"name": "recall", "parameters": {"type": "object"}}, {"no": "name"}]
    session = EngineSession(rec)
    assert session.tools() == [{"type": "function", "function": {
        "name": "recall", "parameters": {"type": "object"}}}]
    text = await session.dispatch_tool("recall", '{"query": "x"}', turn_id="t", task_id=None,
                                       tool_call_id="c1")
    assert json.loads(text) == {"found": "x", "by": "recall"}
    assert rec.calls[-1][3] == {"turn_id": "t", "task_id": None, "tool_call_id": "c1"}
    bad = await session.dispatch_tool("recall", "{not json", turn_id=None, task_id=None,
                                      tool_call_id="c2")
    assert "not valid JSON" in json.loads(bad)["error"]


def test_open_session_and_clone():
    assert open_session(None, None, model=None) is None
    rec = Recorder()
    session = open_session(rec, None, model=None)
    assert session.engine is rec and session.label == "recorder"
    twin = session.clone(model=None)
    assert isinstance(twin.engine, Recorder) and twin.engine is not rec and not twin.active


# -- the pool ----------------------------------------------------------------------------

@pytest.mark.anyio
async def test_pool_serves_sessionless_runs_with_the_engine_itself():
    rec = Recorder()
    pool = SessionPool(rec, model=None, max_sessions=1)
    assert pool.get() is None
    async with pool.session(None) as session:
        assert session.engine is rec
    async with pool.session("a") as a:
        assert a.engine is not rec and isinstance(a.engine, Recorder)
        assert a.session_id == "a"
    assert pool.get("a") is a and pool.get(None) is session
    pool.reset("a")
    assert pool.get("a") is a  # reset keeps the session
    a.start()
    pool.end("a")
    assert pool.get("a") is None and not a.active
    session.start()
    await pool.aclose()
    assert not session.active and pool.get(None) is session  # kept, ended


@pytest.mark.anyio
async def test_a_cancelled_aclose_still_ends_every_session():
    """aclose forgets every session either way, so each one's on_session_end runs even
    when the caller cancels (as for an evicted session); the cancellation still lands."""
    pool = SessionPool(Recorder(), model=None, max_sessions=5)
    sessions = []
    for sid in ("a", "b", "c"):
        async with pool.session(sid) as session:
            session.start()
            sessions.append(session)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await pool.aclose()
        pytest.fail("the cancellation was swallowed")
    assert scope.cancelled_caught
    assert [s.active for s in sessions] == [False, False, False]
    assert [s.engine.of("on_session_end") != [] for s in sessions] == [True, True, True]
    assert pool.get("a") is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("abcdefg"), max_size=25), st.integers(1, 4))
def test_pool_keeps_the_most_recently_used_sessions(ids, bound):
    """Against a plain LRU model: which ids keep a session, and each evicted one ended
    exactly once (never while in flight, since runs here are sequential)."""

    class Counting(ContextEngine):
        def __init__(self):
            self.ends = []

        @property
        def name(self):
            return "counting"

        def update_from_response(self, usage):
            pass

        def should_compress(self, prompt_tokens=None):
            return False

        def compress(self, messages, current_tokens=None, focus_topic=None):
            return messages

        def on_session_end(self, session_id=None, messages=None, **kwargs):
            self.ends.append(session_id)

    pool = SessionPool(Counting(), model=None, max_sessions=bound)
    model: OrderedDict[str, None] = OrderedDict()
    seen = {}

    async def main():
        for sid in ids:
            async with pool.session(sid) as session:
                session.start()
                seen.setdefault(sid, []).append(session)
            model[sid] = None
            model.move_to_end(sid)
            while len(model) > bound:
                model.popitem(last=False)

    anyio.run(main)
    assert {sid for sid in "abcdefg" if pool.get(sid) is not None} == set(model)
    for sid, sessions in seen.items():
        for session in {id(s): s for s in sessions}.values():
            ended = session.engine.ends
            if pool.get(sid) is session:
                assert ended == []
            else:
                assert ended == [sid]


@pytest.mark.anyio
async def test_a_busy_session_is_not_evicted_and_eviction_survives_cancellation(caplog):
    caplog.set_level(logging.DEBUG, logger="lionctx.engines.host")
    rec = Recorder()
    pool = SessionPool(rec, model=None, max_sessions=1, owner="agent 'bot'")
    async with pool.session("a") as a:
        a.start()
        async with pool.session("b") as b:  # over the bound, but a is busy
            b.start()
            assert pool.get("a") is a and pool.get("b") is b
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with pool.session("c"):  # evicts a and b, shielded from the cancel
            await anyio.sleep(1)
    assert scope.cancelled_caught
    assert pool.get("a") is None and pool.get("b") is None and pool.get("c") is not None
    assert ("on_session_end", "a", None) in a.engine.calls
    assert ("on_session_end", "b", None) in b.engine.calls
    assert any("agent 'bot': session 'a' evicted" in r.getMessage() for r in caplog.records)

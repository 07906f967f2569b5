"""The one turn Branch and the agentium Agent both compose (lionctx._turn), through its
public methods: the real openai client against the bundled local server, real
providers (files in a temp dir, a SQLite database), real engines."""

import json
import sqlite3
from contextlib import aclosing
from types import SimpleNamespace

import anyio
import pytest
from agentium_compat import Agent
from hypothesis import given
from hypothesis import strategies as st
from lionctx import (
    Branch,
    ContextProviderRegistry,
    FilesystemContextProvider,
    OpenAIChatModel,
    RunContext,
    SqliteContextProvider,
)
from lionctx._messages import PERSISTENCE_ONLY_FIELDS, is_uid
from lionctx._render import tag_block
from lionctx._turn import Conversation, Turn, copy_messages
from lionctx.branch import Instruction
from lionctx.engines._session import EngineSession
from lionctx.models import ModelResponseError
from lionctx.testing import Reply

from tests.engines.recording import Recorder

SYSTEM = "You are helpful."


@pytest.fixture
def model(server):
    m = OpenAIChatModel("test-model", base_url=server.base_url, api_key="k", max_retries=0,
                        timeout=30)
    yield m
    m.close()


class CompleteOnly:
    """A chat model with ``complete`` and nothing else (no ``stream``)."""

    def __init__(self, inner):
        self.inner = inner

    async def complete(self, messages, *, tools=None, **kwargs):
        return await self.inner.complete(messages, tools=tools, **kwargs)


@pytest.fixture
def notes(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "refunds.md").write_text("Refunds take 5 business days.", encoding="utf-8")
    return folder


@pytest.fixture
def profile_db(tmp_path):
    path = tmp_path / "profile.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id TEXT, name TEXT, plan TEXT)")
    conn.executemany("INSERT INTO users VALUES (?, ?, ?)",
                     [("u1", "Ada", "pro"), ("u2", "Grace", "free")])
    conn.commit()
    conn.close()
    return path


def real_providers(notes, profile_db):
    return [FilesystemContextProvider(notes, glob="*.md", name="notes"),
            SqliteContextProvider(profile_db, "SELECT name, plan FROM users WHERE id = :user_id",
                                  name="profile")]


def conversation(*messages):
    return Conversation(copy_messages([{"role": "system", "content": SYSTEM}, *messages]),
                        name="test")


# -- the steps, one by one ---------------------------------------------------------------

@pytest.mark.anyio
async def test_one_turn_step_by_step(server, model, notes, profile_db):
    registry = ContextProviderRegistry()
    for p in real_providers(notes, profile_db):
        registry.register(p)
    conv = conversation()
    ctx = RunContext(user_id="u1")
    turn = Turn(conv, model, Instruction("how long do refunds take?"), run_context=ctx)
    async with turn:
        report = await turn.gather(registry, SimpleNamespace(run_context=ctx))
        assert [b.name for b in turn.blocks] == ["notes", "profile"]
        notes_text = "# refunds.md\nRefunds take 5 business days."
        assert report.blocks == [notes_text, "name: Ada\nplan: pro"]
        built = turn.build()
        request = await turn.prepare()
        assert request == built  # no engine: nothing selects
        assert request[0]["content"] == "\n\n".join(
            [SYSTEM, tag_block("notes", notes_text), tag_block("profile", "name: Ada\nplan: pro")])
        response = await turn.send(request)
        assert server.last_request["messages"] == request == turn.sent
        assert turn.response is response and conv.last_response is response
        assert turn.api_calls == 1
        assert turn.pending == [{"role": "user", "content": "how long do refunds take?"}]
        turn.add(response.to_message())
        stored = turn.store()
    assert turn.pending == [] and stored == conv.messages[1:]
    assert [m["role"] for m in conv.messages] == ["system", "user", "assistant"]
    assert all(is_uid(m["message_uid"]) for m in conv.messages)
    # blocks were rendered into the request only, never stored
    assert "Refunds" not in json.dumps(conv.messages)


@pytest.mark.anyio
async def test_gather_without_a_registry_or_without_injection(server, model, notes, profile_db):
    turn = Turn(conversation(), model, Instruction("q"))
    assert await turn.gather(None, None) is None
    assert await turn.gather(ContextProviderRegistry(), None) is None
    registry = ContextProviderRegistry()
    fs = real_providers(notes, profile_db)[0]
    registry.register(fs)
    report = await turn.gather(registry, None, inject=False)
    assert report.skipped == ["notes"] and report.fired == []
    assert turn.blocks == () and turn.build() == [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": "q"}]


@pytest.mark.anyio
async def test_exchange_and_stream_record_the_reply(server, model):
    conv = conversation()
    async with Turn(conv, model, Instruction("first")) as turn:
        response = await turn.exchange(temperature=0)
        assert turn.pending[-1] == response.to_message()
        turn.store()
    assert server.last_request["temperature"] == 0
    server.script("one two three")
    async with Turn(conv, model, Instruction("second")) as turn:
        request = await turn.prepare()
        # the request carries the first turn, without persistence fields
        assert [m["content"] for m in request][1:] == ["first", response.content, "second"]
        assert all(not (set(m) & PERSISTENCE_ONLY_FIELDS) for m in request)
        async with aclosing(turn.stream(request)) as deltas:
            text = "".join([d async for d in deltas])
    assert text == "one two three" == turn.response.content
    assert server.last_request["stream"] is True
    assert turn.response.usage["completion_tokens"] == 3


@pytest.mark.anyio
async def test_a_model_needs_stream_only_to_stream(server, model):
    only = CompleteOnly(model)
    with pytest.raises(TypeError, match="complete"):
        Turn(conversation(), object(), Instruction("q"))
    turn = Turn(conversation(), only, Instruction("q"))
    assert (await turn.exchange()).content.endswith("You said: q")
    with pytest.raises(TypeError, match="stream"):
        async for _ in turn.stream(turn.build()):
            pass
    # the faces follow the same rule
    branch = Branch(SYSTEM, only)
    assert (await branch.communicate("hello")).endswith("You said: hello")
    with pytest.raises(TypeError, match="stream"):
        async for _ in branch.run("hello"):
            pass
    assert len(branch.messages) == 3  # the refused stream recorded nothing
    result = await Agent(name="bot", model=only, instructions=SYSTEM).run("hi")
    assert result.output.endswith("You said: hi")
    with pytest.raises(TypeError, match="complete"):
        Branch(SYSTEM, object())


# -- the engine's turn -------------------------------------------------------------------

@pytest.mark.anyio
async def test_a_session_turn_calls_the_hooks_in_order(server, model):
    rec = Recorder()
    conv = conversation()
    session = EngineSession(rec)
    ctx = RunContext(session_id="s-1", run_id="r-1")
    async with Turn(conv, model, Instruction("hi"), session=session, run_context=ctx) as turn:
        await turn.exchange()
        turn.store()
    assert rec.names() == ["on_session_start", "select_context", "update_from_response",
                           "should_compress", "on_turn_complete"]
    assert rec.calls[0] == ("on_session_start", "s-1")
    _, transcript, usage, kw = rec.calls[-1]
    assert transcript == conv.messages and usage == turn.response.usage
    assert kw["turn_id"] == turn.turn_id and is_uid(turn.turn_id)
    assert kw["task_id"] == "r-1" and kw["api_call_count"] == 1
    assert kw["failed"] is False and kw["turn_exit_reason"] == "completed"


@pytest.mark.anyio
async def test_a_failed_send_is_reported_with_the_pending_transcript(server, model):
    rec = Recorder()
    conv = conversation()
    server.script(Reply.failure(500, "down"))
    with pytest.raises(ModelResponseError):
        async with Turn(conv, model, Instruction("lost"), session=EngineSession(rec)) as turn:
            await turn.exchange()
            turn.store()
    _, transcript, usage, kw = rec.calls[-1]
    assert [m["content"] for m in transcript] == [SYSTEM, "lost"]  # pending, not stored
    assert len(conv.messages) == 1 and usage is None
    assert kw["failed"] is True and kw["turn_exit_reason"] == "error"
    assert "should_compress" not in rec.names()


@pytest.mark.anyio
async def test_a_cancelled_turn_is_reported_as_cancelled(server, model):
    rec = Recorder()
    with anyio.CancelScope() as scope:
        async with Turn(conversation(), model, Instruction("q"),
                        session=EngineSession(rec)) as turn:
            scope.cancel()
            await turn.exchange()
    assert scope.cancelled_caught
    kw = rec.calls[-1][3]
    assert kw["interrupted"] is True and kw["turn_exit_reason"] == "cancelled"


@pytest.mark.anyio
async def test_a_turn_that_records_nothing_never_compacts(server, model):
    rec = Recorder()
    rec.due = True
    async with Turn(conversation(), model, Instruction("q"), session=EngineSession(rec),
                    record=False) as turn:
        await turn.exchange()
    assert "should_compress" not in rec.names() and "compress" not in rec.names()
    assert [m["role"] for m in rec.calls[-1][1]] == ["system", "user", "assistant"]


@pytest.mark.anyio
async def test_a_due_compaction_replaces_the_stored_history(server, model):
    rec = Recorder()
    rec.due = True
    rec.compact = lambda msgs: [msgs[0], {"role": "user", "content": "summary"}]
    conv = conversation()
    async with Turn(conv, model, Instruction("q"), session=EngineSession(rec)) as turn:
        await turn.exchange()
        turn.store()
    assert [m["content"] for m in conv.messages] == [SYSTEM, "summary"]
    assert all(is_uid(m["message_uid"]) for m in conv.messages)


@pytest.mark.anyio
async def test_operate_runs_user_and_engine_tools(server, model):
    rec = Recorder()
    rec.tools = [{"name": "recall", "description": "search the past",
                  "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}]

    def lookup(q: str) -> str:
        return f"result for {q}"

    from lionctx._values import tools_by_name

    server.script(Reply.calling("lookup", {"q": "x"}, id="c1"),
                  Reply.calling("recall", {"query": "y"}, id="c2"), "done")
    conv = conversation()
    async with Turn(conv, model, Instruction("find"), session=EngineSession(rec)) as turn:
        specs = turn.offer_tools(tools_by_name([lookup]))
        assert [s["function"]["name"] for s in specs] == ["lookup", "recall"]
        result = await turn.operate(specs, max_rounds=5)
    assert result.output == "done" and result.rounds == 3 and turn.api_calls == 3
    assert [a.output for a in result.action_responses] == [
        "result for x", json.dumps({"found": "y", "by": "recall"})]
    assert rec.of("handle_tool_call")[0][3]["turn_id"] == turn.turn_id
    assert [m["role"] for m in conv.messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert result.messages == conv.messages[1:]


# -- the conversation ----------------------------------------------------------------------

@given(st.integers(0, 6), st.integers(0, 4), st.integers(0, 6), st.booleans())
def test_splice_keeps_later_rows_and_refuses_a_changed_prefix(n, later, k, change):
    rows = [{"role": "user", "content": str(i)} for i in range(n)]
    conv = Conversation(list(rows))
    snapshot = list(conv.messages)
    for i in range(later):
        conv.messages.append({"role": "assistant", "content": f"later {i}"})
    tail = conv.messages[n:]
    if change and n:
        conv.messages[0] = {"role": "user", "content": "edited"}
    before = list(conv.messages)
    compacted = [{"role": "user", "content": f"summary {i}"} for i in range(k)]
    ok = conv.splice(snapshot, compacted)
    if change and n:
        assert not ok and conv.messages == before  # stale: nothing changes
    else:
        assert ok and conv.messages == [*compacted, *tail]
        assert all(a is b for a, b in zip(conv.messages[k:], tail, strict=True))


def test_copy_messages_copies_and_names_bad_input():
    given_rows = [{"role": "user", "content": "x"}]
    copied = copy_messages(given_rows)
    assert copied == [{"role": "user", "content": "x", "message_uid": copied[0]["message_uid"]}]
    assert "message_uid" not in given_rows[0]
    with pytest.raises(TypeError, match="message 1 must be a dict"):
        copy_messages([{"role": "user", "content": "x"}, "oops"])
    with pytest.raises(TypeError, match="str"):
        copy_messages("user: hi")


# -- both faces, one turn ------------------------------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("engine", [False, True])
async def test_branch_and_agent_send_the_same_bytes(server, model, notes, profile_db, engine):
    query = "how long do refunds take?"
    branch = Branch(SYSTEM, model, run_context={"user_id": "u1"},
                    context_engine=Recorder() if engine else None)
    for p in real_providers(notes, profile_db):
        branch.providers.register(p)
    agent = Agent(name="bot", model=model, instructions=SYSTEM,
                  context_providers=real_providers(notes, profile_db),
                  context_engine=Recorder() if engine else None)
    text = await branch.communicate(query)
    result = await agent.run(query, user_id="u1")
    from_branch, from_agent = (json.dumps(r["messages"]).encode() for r in server.requests)
    assert from_branch == from_agent
    assert b"Refunds take 5 business days." in from_branch and b"plan: pro" in from_branch
    assert result.output == text
    assert result.messages == server.requests[0]["messages"]
    # and each face stored the same conversation (uids aside)
    strip = [{k: v for k, v in m.items() if k != "message_uid"} for m in branch.messages[1:]]
    assert strip == [{k: v for k, v in m.items() if k != "message_uid"} for m in result.history]


@pytest.mark.anyio
async def test_branch_prepare_shows_the_request_and_sends_nothing(server, model, notes,
                                                                  profile_db):
    rec = Recorder()
    branch = Branch(SYSTEM, model, run_context={"user_id": "u2"}, context_engine=rec)
    for p in real_providers(notes, profile_db):
        branch.providers.register(p)
    request = await branch.prepare("plans?")
    assert server.requests == [] and len(branch.messages) == 1
    assert branch.last_context_report.blocks[1] == "name: Grace\nplan: free"
    assert rec.names() == ["select_context"]  # no session started, no turn reported
    await branch.communicate("plans?")
    assert server.requests[0]["messages"] == request

"""OpenAIChatModel: the real openai client against the bundled local server."""

import asyncio
import socket
import subprocess
import sys

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import LionctxError
from lionctx._messages import ensure_uid, new_uid
from lionctx.models import (
    DEFAULT_MODEL,
    ChatResponse,
    ModelAuthError,
    ModelConfigError,
    ModelConnectionError,
    ModelResponseError,
    OpenAIChatModel,
)
from lionctx.testing import ECHO_LABEL, LocalOpenAIServer, Reply

KEY = "sk-test-not-a-real-key-4242"
ADD_SPEC = {"type": "function", "function": {
    "name": "add", "description": "Add.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}


@pytest.fixture
def model(server):
    return OpenAIChatModel("test-model", base_url=server.base_url, api_key=KEY, max_retries=0)


@pytest.fixture
def clean_env(monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LIONCTX_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.anyio
async def test_complete_returns_text_usage_and_sends_exact_body(server, model):
    stored = [ensure_uid({"role": "system", "content": "Be terse."}),
              {**ensure_uid({"role": "user", "content": "hello"}),
               "_absorbed_message_uids": [new_uid()]}]
    resp = await model.complete(stored, temperature=0)
    assert isinstance(resp, ChatResponse)
    assert resp.content == f"{ECHO_LABEL} You said: hello"
    assert resp.tool_calls == [] and resp.finish_reason == "stop"
    assert resp.usage == {"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9}
    assert resp.raw is not None and resp.model == "test-model"
    assert server.last_request == {
        "model": "test-model", "temperature": 0,
        "messages": [{"role": "system", "content": "Be terse."},
                     {"role": "user", "content": "hello"}],
    }
    assert "message_uid" in stored[0]  # the caller's dicts are untouched


@pytest.mark.anyio
async def test_tool_calls_non_streaming(server, model):
    server.script(Reply.calling("add", {"a": 2}, id="call_1"))
    resp = await model.complete([{"role": "user", "content": "add"}], tools=[ADD_SPEC],
                                tool_choice="auto")
    assert resp.content is None and resp.finish_reason == "tool_calls"
    assert resp.tool_calls == [{"id": "call_1", "type": "function",
                                "function": {"name": "add", "arguments": '{"a": 2}'}}]
    assert resp.to_message() == {"role": "assistant", "content": None,
                                 "tool_calls": resp.tool_calls}
    body = server.last_request
    assert body["tools"] == [ADD_SPEC] and body["tool_choice"] == "auto"


@pytest.mark.anyio
async def test_no_tools_key_when_no_tools(server, model):
    await model.complete([{"role": "user", "content": "x"}], tools=[], tool_choice=None)
    assert "tools" not in server.last_request and "tool_choice" not in server.last_request


@pytest.mark.anyio
async def test_stream_yields_deltas_then_response_and_usage(server, model):
    stream = model.stream([{"role": "user", "content": "stream this please"}])
    deltas = [d async for d in stream]
    assert len(deltas) > 1
    text = "".join(deltas)
    assert text == f"{ECHO_LABEL} You said: stream this please" == stream.content
    assert stream.response.content == text
    assert stream.usage == stream.response.usage
    assert stream.usage["completion_tokens"] == len(text.split())
    body = server.last_request
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


@pytest.mark.anyio
async def test_stream_without_usage_option(server):
    model = OpenAIChatModel("m", base_url=server.base_url, api_key=KEY, max_retries=0,
                            include_usage=False)
    stream = model.stream([{"role": "user", "content": "x"}])
    assert [d async for d in stream]
    assert "stream_options" not in server.last_request
    assert stream.usage is None and stream.response.usage is None


@pytest.mark.anyio
async def test_stream_assembles_tool_calls(server, model):
    server.script(Reply(content=None, tool_calls=[
        {"name": "add", "arguments": {"a": 1}, "id": "c1"},
        {"name": "add", "arguments": {"a": 20}, "id": "c2"}]))
    stream = model.stream([{"role": "user", "content": "x"}], tools=[ADD_SPEC])
    assert [d async for d in stream] == []
    assert stream.response.content is None
    assert stream.response.finish_reason == "tool_calls"
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in stream.response.tool_calls] == [("c1", "add", '{"a": 1}'),
                                                      ("c2", "add", '{"a": 20}')]


@pytest.mark.anyio
async def test_stream_can_be_closed_early(server, model):
    server.script("one two three four five six")
    async with model.stream([{"role": "user", "content": "x"}]) as stream:
        async for delta in stream:
            assert delta == "one "
            break
    assert stream.response is None
    # the model still works afterwards
    assert (await model.complete([{"role": "user", "content": "y"}])).content.endswith("y")


def test_complete_sync_in_a_worker_thread(server, model):
    async def main():
        return await anyio.to_thread.run_sync(
            lambda: model.complete_sync([{"role": "user", "content": "summarize"}]))

    resp = anyio.run(main)
    assert resp.content == f"{ECHO_LABEL} You said: summarize"
    assert server.last_request["messages"] == [{"role": "user", "content": "summarize"}]
    model.close()


def test_one_model_across_event_loops(server, model):
    for word in ("first", "second"):
        resp = asyncio.run(model.complete([{"role": "user", "content": word}]))
        assert resp.content.endswith(word)


@pytest.mark.anyio
async def test_environment_configures_the_model(server, clean_env):
    srv = LocalOpenAIServer(api_key="env-key-123").start()
    try:
        clean_env.setenv("OPENAI_BASE_URL", srv.base_url)
        clean_env.setenv("OPENAI_API_KEY", "env-key-123")
        clean_env.setenv("LIONCTX_MODEL", "env-model")
        model = OpenAIChatModel(max_retries=0)
        assert model.model == "env-model" and model.base_url == srv.base_url
        await model.complete([{"role": "user", "content": "x"}])
        assert srv.last_request["model"] == "env-model"
        assert srv.received[-1].headers["authorization"] == "Bearer env-key-123"
        # arguments beat the environment
        explicit = OpenAIChatModel("arg-model", base_url=server.base_url, api_key="k",
                                   max_retries=0)
        await explicit.complete([{"role": "user", "content": "x"}])
        assert server.last_request["model"] == "arg-model"
    finally:
        srv.stop()


def test_default_model_name(clean_env):
    assert OpenAIChatModel().model == DEFAULT_MODEL == "gpt-4o-mini"


@pytest.mark.anyio
async def test_missing_key_fails_at_call_time_not_construction(clean_env):
    model = OpenAIChatModel()  # constructing needs nothing
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY") as info:
        await model.complete([{"role": "user", "content": "x"}])
    assert "api.openai.com" in str(info.value)
    with pytest.raises(ModelConfigError):
        model.complete_sync([{"role": "user", "content": "x"}])
    remote = OpenAIChatModel(base_url="https://user:pw@models.example.com/v1?token=t")
    with pytest.raises(ModelConfigError) as info:
        await remote.complete([{"role": "user", "content": "x"}])
    assert "https://models.example.com/v1" in str(info.value)
    assert "pw" not in str(info.value) and "token" not in str(info.value)


@pytest.mark.anyio
async def test_loopback_server_needs_no_key(server, clean_env):
    model = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
    assert not model.has_api_key
    assert (await model.complete([{"role": "user", "content": "ok"}])).content.endswith("ok")


@pytest.mark.anyio
async def test_unreachable_server_is_a_clear_connection_error():
    port = _free_port()
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY,
                            max_retries=0)
    with pytest.raises(ModelConnectionError) as info:
        await model.complete([{"role": "user", "content": "x"}])
    assert f"127.0.0.1:{port}" in str(info.value) and KEY not in str(info.value)
    with pytest.raises(ModelConnectionError):
        async for _ in model.stream([{"role": "user", "content": "x"}]):
            pass
    with pytest.raises(ModelConnectionError):
        model.complete_sync([{"role": "user", "content": "x"}])


@pytest.mark.anyio
async def test_refused_key_never_appears_in_the_error():
    with LocalOpenAIServer(api_key="the-right-key") as srv:
        model = OpenAIChatModel("m", base_url=srv.base_url, api_key=KEY, max_retries=0)
        with pytest.raises(ModelAuthError) as info:
            await model.complete([{"role": "user", "content": "x"}])
    assert info.value.status_code == 401
    assert KEY not in str(info.value) and "the-right-key" not in str(info.value)
    assert "OPENAI_API_KEY" in str(info.value)


@pytest.mark.anyio
async def test_server_error_status_and_message(server, model):
    server.script(Reply.failure(500, f"backend exploded near {KEY}"))
    with pytest.raises(ModelResponseError) as info:
        await model.complete([{"role": "user", "content": "x"}])
    assert info.value.status_code == 500
    assert "backend exploded" in str(info.value) and KEY not in str(info.value)


@pytest.mark.anyio
async def test_bad_arguments_fail_before_any_request(server, model):
    with pytest.raises(TypeError, match="list of message dicts") as info:
        await model.complete("hello")
    assert isinstance(info.value, LionctxError)  # a refusal of lionctx's, naming the value
    with pytest.raises(ValueError, match="message 1"):
        await model.complete([{"role": "user", "content": "a"}, {"content": "no role"}])
    with pytest.raises(TypeError, match="stream"):
        await model.complete([{"role": "user", "content": "a"}], stream=True)
    with pytest.raises(TypeError, match="message 0"):
        model.stream([42])
    assert server.requests == []


@pytest.mark.parametrize("kwargs,err", [
    ({"timeout": 0}, ValueError), ({"max_retries": -1}, ValueError),
    ({"params": [1]}, TypeError), ({"base_url": 5}, TypeError), ({"api_key": 5}, TypeError),
])
def test_bad_configuration_is_refused(kwargs, err):
    with pytest.raises(err) as info:
        OpenAIChatModel("m", **kwargs)
    assert isinstance(info.value, LionctxError)


def test_repr_hides_the_key():
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1", api_key=KEY)
    assert KEY not in repr(model) and "api_key=set" in repr(model)


@pytest.mark.anyio
async def test_default_params_go_into_every_request(server):
    model = OpenAIChatModel("m", base_url=server.base_url, api_key=KEY, max_retries=0,
                            params={"temperature": 0.5, "max_tokens": 10})
    await model.complete([{"role": "user", "content": "x"}], max_tokens=3)
    assert server.last_request["temperature"] == 0.5
    assert server.last_request["max_tokens"] == 3


def test_importing_lionctx_imports_neither_openai_nor_tiktoken():
    code = ("import sys, lionctx, lionctx.models, agentium_compat; "
            "print('openai' in sys.modules, 'tiktoken' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False False"


# -- secrets never travel with an error ------------------------------------------------

def _all_text_of(err: BaseException) -> str:
    """Everything a user could see of an error: str, repr, chained errors, traceback."""
    import traceback

    parts = [str(err), repr(err), "".join(traceback.format_exception(err))]
    for linked in (err.__cause__, err.__context__):
        if linked is not None:
            parts += [str(linked), repr(linked),
                      "".join(traceback.format_exception(linked))]
    return "\n".join(parts)


ECHOING_BODIES = [
    f"Incorrect API key provided: {KEY}. You can find your API key at the dashboard.",
    f"key {KEY[:-4]}**** is not allowed",  # a long fragment of the key
]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("body", ECHOING_BODIES)
async def test_auth_error_body_echoing_the_key_reaches_no_error_part(server, model, status, body):
    for call in ("complete", "stream", "complete_sync"):
        server.script(Reply.failure(status, body))
        with pytest.raises(ModelAuthError) as info:
            if call == "complete":
                await model.complete([{"role": "user", "content": "x"}])
            elif call == "stream":
                async for _ in model.stream([{"role": "user", "content": "x"}]):
                    pass
            else:
                await anyio.to_thread.run_sync(
                    model.complete_sync, [{"role": "user", "content": "x"}])
        err = info.value
        assert err.status_code == status
        # what is useful survives: the status and the server's error type
        assert f"HTTP {status}" in str(err) and "authentication_error" in str(err)
        assert err.__cause__ is None
        assert err.__context__ is None or err.__suppress_context__
        seen = _all_text_of(err)
        assert KEY not in seen and KEY[:-4] not in seen, call
        assert "Incorrect API key" not in seen


@pytest.mark.anyio
async def test_other_status_errors_keep_no_chained_openai_error(server, model):
    server.script(Reply.failure(500, f"backend exploded near {KEY[:-4]}"),
                  Reply.failure(429, f"slow down {KEY}"))
    for status in (500, 429):
        with pytest.raises(ModelResponseError) as info:
            await model.complete([{"role": "user", "content": "x"}])
        assert info.value.status_code == status
        assert info.value.__cause__ is None
        seen = _all_text_of(info.value)
        assert KEY not in seen and KEY[:-4] not in seen
    assert "backend exploded" in str(info.value) or "slow down" in str(info.value)


@pytest.mark.anyio
async def test_connection_errors_keep_no_chained_openai_error():
    port = _free_port()
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY,
                            max_retries=0)
    with pytest.raises(ModelConnectionError) as info:
        await model.complete([{"role": "user", "content": "x"}])
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert KEY not in _all_text_of(info.value)


def test_scrub_masks_long_key_fragments_only():
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1", api_key=KEY)
    assert model._scrub(f"a {KEY} b") == "a *** b"
    assert model._scrub(f"x{KEY[3:20]}y") == "x***y"
    assert model._scrub("sk-t 4242 ok") == "sk-t 4242 ok"  # short pieces are not secrets
    assert OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1")._scrub(KEY) == KEY


# -- loopback detection ---------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8000/v1", "http://127.3.4.5/v1", "http://localhost:1/v1",
    "http://LOCALHOST:1/v1", "http://[::1]:8000/v1", "http://[::ffff:127.0.0.1]:8000/v1",
])
def test_loopback_servers_get_the_placeholder_key(url, clean_env):
    assert OpenAIChatModel("m", base_url=url)._key() == "lionctx-local-no-key"


@pytest.mark.parametrize("url", [
    "http://127.example.com/v1", "http://127.0.0.1.nip.io/v1", "http://localhost.example.com/v1",
    "http://127/v1", "http://1270.0.0.1/v1", "http://10.0.0.1/v1", "http://0.0.0.0/v1",
    "http://[::2]/v1", "http://[::ffff:10.0.0.1]/v1", "https://api.openai.com/v1", "",
])
def test_names_that_only_look_local_need_a_real_key(url, clean_env):
    model = OpenAIChatModel("m", base_url=url or None)
    with pytest.raises(ModelConfigError, match="no API key"):
        model.complete_sync([{"role": "user", "content": "x"}])


@given(label=st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True),
       tld=st.sampled_from(["com", "net", "io", "example"]))
def test_a_dns_name_is_never_loopback_by_its_prefix(label, tld):
    from lionctx.models._openai_chat import is_loopback as _is_loopback

    assert not _is_loopback(f"http://127.{label}.{tld}/v1")
    assert not _is_loopback(f"http://localhost.{label}.{tld}/v1")


@given(before=st.text(max_size=40), after=st.text(max_size=40),
       start=st.integers(0, len(KEY) - 8), size=st.integers(8, len(KEY)))
def test_scrubbed_text_holds_no_long_piece_of_the_key(before, after, start, size):
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1", api_key=KEY)
    out = model._scrub(before + KEY[start:start + size] + after)
    assert not any(KEY[i:i + 8] in out for i in range(len(KEY) - 7))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_one_async_client_per_loop_reused_and_closed(server, anyio_backend):
    model = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
    first = await model.complete([{"role": "user", "content": "one"}])
    second = await model.complete([{"role": "user", "content": "two"}])
    assert first.content.endswith("one") and second.content.endswith("two")
    assert len(model._aclients) == 1  # the second call reused the first's client
    await model.aclose()
    assert len(model._aclients) == 0


@pytest.mark.parametrize(("kwargs", "error", "named"), [
    ({"timeout": 0}, ValueError, "timeout"), ({"timeout": "5"}, ValueError, "timeout"),
    ({"timeout": True}, ValueError, "timeout"), ({"max_retries": -1}, ValueError, "max_retries"),
    ({"max_retries": 1.5}, ValueError, "max_retries"), ({"params": [1]}, TypeError, "params"),
    ({"api_key": 7}, TypeError, "api_key"), ({"base_url": b"x"}, TypeError, "base_url"),
])
def test_bad_settings_are_refused_naming_them(kwargs, error, named):
    with pytest.raises(error, match=named) as info:
        OpenAIChatModel("m", **kwargs)
    assert isinstance(info.value, LionctxError)

"""LocalOpenAIServer: an OpenAI-compatible server on 127.0.0.1."""

import json

import httpx
import openai
import pytest
from lionctx.testing import ECHO_LABEL, LocalOpenAIServer, Reply, echo_reply


@pytest.fixture
def server():
    with LocalOpenAIServer(models=("echo-a", "echo-b")) as srv:
        yield srv


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as c:
        yield c


def test_binds_loopback_on_an_ephemeral_port(server):
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.port > 0


def test_lists_models(client):
    assert [m.id for m in client.models.list()] == ["echo-a", "echo-b"]


def test_echo_reply_is_labelled_deterministic_and_names_context(client, server):
    messages = [
        {"role": "system", "content": 'S\n\n<context name="notes">\nx\n</context>'},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second  question"}]},
    ]
    one = client.chat.completions.create(model="m", messages=messages)
    two = client.chat.completions.create(model="m", messages=messages)
    text = one.choices[0].message.content
    assert text == two.choices[0].message.content
    assert text == f"{ECHO_LABEL} You said: second question | context seen: notes"
    assert text == echo_reply({"messages": messages})
    assert one.usage.completion_tokens == len(text.split())


def test_records_every_body_in_order(client, server):
    for word in ("a", "b"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": word}],
                                       temperature=0.1)
    assert server.requests == [
        {"model": "m", "messages": [{"role": "user", "content": "a"}], "temperature": 0.1},
        {"model": "m", "messages": [{"role": "user", "content": "b"}], "temperature": 0.1},
    ]
    assert server.last_request["messages"][0]["content"] == "b"
    assert [r.method for r in server.received] == ["POST", "POST"]
    server.clear()
    assert server.requests == []
    with pytest.raises(LookupError):
        server.last_request  # noqa: B018 - the access must raise


def test_scripted_replies_in_order_then_echo(client, server):
    seen = []

    def dynamic(body):
        seen.append(body["messages"][-1]["content"])
        return {"content": "from callable"}

    server.script("plain", Reply(content="obj", usage={"prompt_tokens": 1,
                                                      "completion_tokens": 2,
                                                      "total_tokens": 3}),
                  {"content": "dict"}, dynamic)
    assert server.pending == 4
    outs = []
    for i in range(5):
        r = client.chat.completions.create(model="m",
                                           messages=[{"role": "user", "content": str(i)}])
        outs.append((r.choices[0].message.content, r.usage.total_tokens))
    assert [o[0] for o in outs] == ["plain", "obj", "dict", "from callable",
                                    f"{ECHO_LABEL} You said: 4"]
    assert outs[1][1] == 3 and seen == ["3"]


def test_scripted_tool_call(client, server):
    server.script(Reply.calling("lookup", {"id": 7}))
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"id": 7}
    assert call.id.startswith("call_")


def test_streaming_events_end_with_usage_and_done(server):
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi there"}]}
    with httpx.stream("POST", server.base_url + "/chat/completions", json=body) as resp:
        assert resp.headers["content-type"] == "text/event-stream"
        lines = [line for line in resp.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[len("data: "):]) for line in lines[:-1]]
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 0
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1])
    assert text == f"{ECHO_LABEL} You said: hi there"
    assert events[-2]["choices"][0]["finish_reason"] == "stop"


def test_errors_are_openai_shaped(server):
    r = httpx.post(server.base_url + "/chat/completions", content=b"{nope",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(server.base_url + "/chat/completions", json={"messages": "x"})
    assert r.status_code == 400
    r = httpx.post(server.base_url + "/embeddings", json={})
    assert r.status_code == 404
    server.script(Reply.failure(503, "overloaded"))
    r = httpx.post(server.base_url + "/chat/completions", json={"messages": []})
    assert r.status_code == 503 and r.json()["error"]["message"] == "overloaded"


def test_api_key_is_checked_when_configured():
    with LocalOpenAIServer(api_key="right") as srv:
        with openai.OpenAI(base_url=srv.base_url, api_key="wrong", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError):
                bad.models.list()
        with openai.OpenAI(base_url=srv.base_url, api_key="right", max_retries=0) as good:
            assert [m.id for m in good.models.list()] == ["lionctx-echo"]


def test_stop_closes_the_port():
    srv = LocalOpenAIServer().start()
    url = srv.base_url
    srv.stop()
    srv.stop()  # idempotent
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/models")
    with pytest.raises(RuntimeError, match="not running"):
        srv.port  # noqa: B018 - the access must raise


@pytest.mark.parametrize("kwargs", [{"port": -1}, {"port": "80"}, {"models": ()}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        LocalOpenAIServer(**kwargs)


def test_unscriptable_items_are_refused(server):
    with pytest.raises(TypeError, match="cannot script"):
        server.script(42)


# -- secrets stay out of reprs and logs ------------------------------------------------

SECRET = "sk-server-test-secret-9876"


def test_recorded_request_repr_hides_the_authorization_header():
    with LocalOpenAIServer(api_key=SECRET) as srv:
        with openai.OpenAI(base_url=srv.base_url, api_key=SECRET, max_retries=0) as c:
            c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        httpx.get(srv.base_url + "/models", headers={"Authorization": f"Bearer {SECRET}",
                                                     "X-Api-Key": SECRET, "Cookie": SECRET})
        received = srv.received
        shown = repr(received) + str(received) + repr(srv) + str(srv)
        shown += "".join(repr(r.headers) + str(r.headers) for r in received)
    assert SECRET not in shown
    # the values are still there for tests that check them
    assert received[0].headers["authorization"] == f"Bearer {SECRET}"
    assert received[1].headers["x-api-key"] == SECRET
    assert "content-type" in repr(received[0].headers)  # harmless headers still show


def test_request_log_lines_leave_out_query_strings(caplog):
    caplog.set_level("DEBUG", logger="lionctx.testing.openai_server")
    with LocalOpenAIServer() as srv:
        r = httpx.get(srv.base_url + f"/models?api-key={SECRET}")
        assert r.status_code == 200
        r = httpx.get(srv.base_url + f"/nope?token={SECRET}")
        assert r.status_code == 404
    assert "/v1/models" in caplog.text  # the request is still logged
    assert SECRET not in caplog.text


def test_records_are_bounded_oldest_dropped():
    with LocalOpenAIServer(max_records=3) as srv:
        for i in range(5):
            httpx.post(srv.base_url + "/chat/completions",
                       json={"messages": [{"role": "user", "content": f"m{i}"}]})
        assert [b["messages"][0]["content"] for b in srv.requests] == ["m2", "m3", "m4"]
        assert len(srv.received) == 3


@pytest.mark.parametrize("kwargs", [{"max_records": 0}, {"max_records": True},
                                    {"max_records": "9"}, {"api_key": 5}])
def test_bad_record_limit_or_key_is_refused(kwargs):
    with pytest.raises((ValueError, TypeError), match=next(iter(kwargs))):
        LocalOpenAIServer(**kwargs)

"""What a TypeScript user writes, taken as written: openai()'s options object,
object-literal providers, "did you mean" on a mistyped option, runId on a result."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentium_compat import Agent, RunContext, openai, resolve_context, resolveContextProviders
from lionctx import InvalidType, InvalidValue, LionctxError, Status
from lionctx.testing import LocalOpenAIServer

pytestmark = pytest.mark.anyio


async def notes_fetch(query: str, ctx: Any) -> str:
    return f"notes for {ctx.userId} about {query}"


# -- openai(model, options) -------------------------------------------------------

async def test_openai_takes_agentiums_options_object(server: LocalOpenAIServer) -> None:
    for model in (openai("gpt-4o", {"baseURL": server.base_url, "apiKey": "k"}),
                  openai("gpt-4o", {"base_url": server.base_url}, api_key="k"),
                  openai("gpt-4o", baseURL=server.base_url, apiKey="k"),
                  openai("gpt-4o", base_url=server.base_url, api_key="k")):
        assert (model.model, model.base_url) == ("gpt-4o", server.base_url)
        # Agent(options) is added by @accepts_options_mapping, which mypy does not see
        agent = Agent({"name": "bot", "model": model, "instructions": "Be kind."})  # type: ignore[call-arg, arg-type]
        result = await agent.run("hello")
        assert result.output.startswith("[offline echo model] You said: hello")
        assert server.requests[-1]["model"] == "gpt-4o"
        model.close()
    tuned = openai("m", {"baseURL": server.base_url, "timeoutMs": 2_500, "maxRetries": 0,
                         "includeUsage": False})
    assert (tuned.timeout, tuned.max_retries, tuned.include_usage) == (2.5, 0, False)


@pytest.mark.parametrize(("options", "keywords", "message"), [
    ({"baseUrl ": "x"}, {}, r"openai\(\) got an unknown option 'baseUrl '"),
    ({"baseurl": "x"}, {}, r"unknown option 'baseurl'; did you mean 'baseURL'\?"),
    ({"apikey": "k"}, {}, r"unknown option 'apikey'; did you mean 'apiKey'\?"),
    ({}, {"max_retry": 1}, r"unknown option 'max_retry'; did you mean 'max_retries'\?"),
    ({"organization": "o"}, {}, r"unknown option 'organization'$"),
    ({"baseURL": "a"}, {"base_url": "b"}, r"'baseURL' and 'base_url'.*not both"),
    ({"timeout": 1, "timeoutMs": 5}, {}, r"'timeout' and 'timeoutMs'"),
])
def test_openai_refuses_an_unknown_or_doubled_option_by_name(
        options: dict[str, Any], keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidType, match=message):
        openai("m", options, **keywords)


def test_openai_options_must_be_a_mapping() -> None:
    with pytest.raises(InvalidType, match="options must be a mapping"):
        openai("m", ["baseURL", "x"])  # type: ignore[arg-type]


# -- did you mean ---------------------------------------------------------------------

@pytest.mark.parametrize(("options", "keywords", "message"), [
    ({"name": "a", "contextProvider": []}, {},
     r"Agent got an unknown option 'contextProvider'; did you mean 'contextProviders'\?"),
    ({"name": "a"}, {"context_provider": []},
     r"unknown option 'context_provider'; did you mean 'context_providers'\?"),
    ({"name": "a", "contextTimout": 1}, {},
     r"unknown option 'contextTimout'; did you mean 'contextTimeout'\?"),
    ({"name": "a", "instruction": "x"}, {},
     r"unknown option 'instruction'; did you mean 'instructions'\?"),
    ({"name": "a", "tools": []}, {}, r"unknown option 'tools'$"),
])
def test_agent_names_an_unknown_option_and_what_was_meant(
        options: dict[str, Any], keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidType, match=message):
        Agent(options, **keywords)  # type: ignore[call-arg, arg-type]


async def test_run_options_and_resolve_options_say_what_was_meant(
        server: LocalOpenAIServer) -> None:
    agent = Agent(name="a", model=openai("m", {"baseURL": server.base_url, "apiKey": "k"}))
    with pytest.raises(InvalidType, match=r"'userID'; did you mean 'userId'\?"):
        await agent.run("q", {"userID": "u1"})
    with pytest.raises(InvalidType, match=r"'sessionID'; did you mean 'sessionId'\?"):
        await agent.run("q", sessionID="s")
    with pytest.raises(InvalidType, match=r"'timout'; did you mean 'timeout'\?"):
        await resolve_context([], "q", None, timout=1)  # type: ignore[call-arg]
    with pytest.raises(InvalidType, match=r"'deadlin'; did you mean 'deadline'\?"):
        await resolveContextProviders([], "q", None, deadlin=1)
    with pytest.raises(InvalidType, match=r"unknown option 'onOutcome'; "
                                          r"did you mean 'on_outcome'\?"):
        await resolve_context([], "q", None, onOutcome=print)  # type: ignore[call-arg]
    assert server.requests == []  # refused before anything ran


# -- object-literal providers ---------------------------------------------------------

async def test_an_object_literal_is_a_provider_in_resolve() -> None:
    def plain(query: str, ctx: Any) -> str:  # sync: runs in a worker thread
        return "plain text"

    async def nothing(query: str, ctx: Any) -> None:
        return None

    providers = [{"name": "notes", "fetch": notes_fetch},
                 {"label": "legacy", "fetchContext": plain},
                 {"name": "none", "fetch": nothing}]
    text = await resolveContextProviders(providers, "refunds", {"userId": "u1"})
    assert text == ('<context name="notes">\nnotes for u1 about refunds\n</context>\n\n'
                    '<context name="legacy">\nplain text\n</context>')
    res = await resolve_context(providers, "refunds", {"userId": "u1"})
    assert [(o.name, o.status) for o in res.outcomes] == [
        ("notes", Status.FIRED), ("legacy", Status.FIRED), ("none", Status.EMPTY)]


async def test_an_object_literal_that_raises_costs_its_row_only() -> None:
    async def broken(query: str, ctx: Any) -> str:
        raise RuntimeError("notes service down")

    res = await resolve_context([{"name": "broken", "fetch": broken},
                                {"name": "notes", "fetch": notes_fetch}], "q", {"userId": "u"})
    assert [o.status for o in res.outcomes] == [Status.FAILED, Status.FIRED]
    assert res.outcomes[0].reason == "RuntimeError: notes service down"


async def test_volatile_object_literal_is_rendered_last() -> None:
    async def clock(query: str, ctx: Any) -> str:
        return "12:00"

    text = await resolveContextProviders([{"name": "now", "fetch": clock, "volatile": True},
                                          {"name": "notes", "fetch": notes_fetch}], "q")
    assert text.index('name="notes"') < text.index('name="now"')


@pytest.mark.parametrize(("provider", "error", "message"), [
    ({"name": "notes"}, InvalidType,
     r"providers\[1\] \('notes'\) is a mapping but not a context provider: 'fetch' must be "
     r"a function of \(query, ctx\), got None"),
    ({"name": "notes", "fetch": "notes.md"}, InvalidType, r"providers\[1\] \('notes'\).*"
                                                          r"got 'notes.md'"),
    ({"fetch": notes_fetch}, InvalidValue,
     r"providers\[1\] is a mapping but not a context provider: 'name' must be a non-empty "
     r"str, got None"),
    ({"name": "", "fetch": notes_fetch}, InvalidValue, r"'name' must be a non-empty str"),
    ({"name": "notes", "fecth": notes_fetch}, InvalidType,
     r"providers\[1\] \(an object-literal provider\) got an unknown option 'fecth'; "
     r"did you mean 'fetch'\?"),
    ({"name": "notes", "fetch": notes_fetch, "priority": 1}, InvalidType,
     r"unknown option 'priority'$"),
    ({"name": "a", "label": "b", "fetch": notes_fetch}, InvalidType, "'name' or 'label'"),
    ({"name": "a", "fetch": notes_fetch, "volatile": "yes"}, InvalidType,
     "'volatile' must be a bool"),
])
async def test_a_mapping_that_is_not_a_provider_is_refused_by_name(
        provider: dict[str, Any], error: type[LionctxError], message: str) -> None:
    called: list[str] = []

    async def first(query: str, ctx: Any) -> str:
        called.append(query)
        return "x"

    with pytest.raises(error, match=message):
        await resolveContextProviders([{"name": "first", "fetch": first}, provider], "q")
    assert called == []  # refused before any provider ran


async def test_agent_takes_object_literal_providers(server: LocalOpenAIServer) -> None:
    model = openai("gpt-4o", {"baseURL": server.base_url, "apiKey": "k"})
    agent = Agent({"name": "bot", "model": model, "instructions": "Be kind.",  # type: ignore[call-arg, arg-type]
                   "contextProviders": [{"name": "notes", "fetch": notes_fetch}]})
    result = await agent.run("refunds", {"userId": "u1"})
    assert ('<context name="notes">\nnotes for u1 about refunds\n</context>'
            in server.requests[-1]["messages"][0]["content"])
    assert result.contextReport is not None
    assert result.contextReport.outcomes[0].status is Status.FIRED
    with pytest.raises(InvalidType, match=r"context_providers\[0\] \(an object-literal "
                                          r"provider\) got an unknown option 'fn'"):
        Agent({"name": "bot", "model": model, "contextProviders": [{"name": "x", "fn": 1}]})  # type: ignore[call-arg, arg-type]
    model.close()


# -- runId --------------------------------------------------------------------------

async def test_a_result_carries_its_run_id(server: LocalOpenAIServer) -> None:
    agent = Agent(name="bot", model=openai("m", {"baseURL": server.base_url, "apiKey": "k"}))
    given = await agent.run("hi", {"runId": "run-42"})
    assert given.runId == given.run_id == given["run_id"] == "run-42"
    assert json.loads(given.to_json())["run_id"] == "run-42"
    fresh = await agent.run("hi", run_context=RunContext(user_id="u"))
    assert fresh.runId == fresh.run_context.run_id
    assert len(fresh.runId) == 32 and fresh.runId != given.runId


def test_a_built_in_providers_mistyped_option_says_what_was_meant(tmp_path: Any) -> None:
    from agentium_compat import FilesystemContextProvider, HttpContextProvider

    with pytest.raises(InvalidType, match=r"FilesystemContextProvider got an unknown option "
                                          r"'basepath'; did you mean 'basePath'\?"):
        FilesystemContextProvider({"basepath": str(tmp_path)})
    with pytest.raises(InvalidType, match=r"'cacheTTLMs'; did you mean 'cacheTtlMs'\?"):
        HttpContextProvider({"url": "http://127.0.0.1:9/x", "cacheTTLMs": 5})
    with pytest.raises(InvalidType, match=r"'max_files' \(agentium spells it 'maxFiles'\)"):
        FilesystemContextProvider({"basePath": str(tmp_path), "max_files": 2})

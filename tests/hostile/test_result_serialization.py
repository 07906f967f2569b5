"""A run's result handed to a serializer never writes out the run context's secrets.

An agentium handler ends with ``res.json(result)``; its port hands the ``RunResult``
to ``json.dumps`` or a web framework's encoder (``pydantic_core.to_json``, what
FastAPI uses). The run context travels with the result and holds what a run needs:
database clients and API keys in ``dependencies``, ``metadata``, ``session_state``,
extra fields. None of it may reach the JSON: not through the encoders, not through
``to_dict``/``to_json``, not through a failing provider's message quoting a key, not
through a walker that takes the dataclass path, not through ``repr`` in a log line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any

import pydantic_core
import pytest
from agentium_compat import Agent, RunContext, RunResult
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import Status, resolve_context

pytestmark = pytest.mark.anyio

DEP_SECRET = "sk-dep-0123456789abcdef"
NESTED_SECRET = "nested-pw-7f3a91"
META_SECRET = "meta-token-55aa21"
STATE_SECRET = "state-cookie-9b8c7d"
EXTRA_SECRET = "extra-dsn-pw-4e4e4e"
URL_PASSWORD = "url-pw-31337"
SECRETS = (DEP_SECRET, NESTED_SECRET, META_SECRET, STATE_SECRET, EXTRA_SECRET, URL_PASSWORD)


class Client:
    """A dependency that is an object (a database client), holding a key."""

    def __init__(self, key: str) -> None:
        self.key = key


def run_context() -> RunContext:
    return RunContext(
        user_id="u1", run_id="run-1",
        dependencies={"openai_key": DEP_SECRET, "db": Client(DEP_SECRET),
                      "vault": {"nested": [NESTED_SECRET]}},
        metadata={"token": META_SECRET},
        session_state={"cookie": STATE_SECRET},
        extra={"dsn": f"postgres://app:{EXTRA_SECRET}@db/app"},
    )


class Notes:
    name = "notes"

    async def fetch(self, query: str, ctx: Any) -> str:
        return "Refunds take 5 days."


class LeakyProvider:
    """Fails with the run context's own secrets in its exception message."""

    name = "billing"

    async def fetch(self, query: str, ctx: Any) -> str:
        raise ConnectionError(f"auth failed with key {ctx.dependencies['openai_key']} and "
                              f"{ctx.dependencies['vault']['nested'][0]} at "
                              f"postgres://svc:{URL_PASSWORD}@db.internal/billing")


def assert_clean(serialized: str | bytes) -> None:
    text = serialized.decode() if isinstance(serialized, bytes) else serialized
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} written out"


async def run(model: Any, providers: list[Any]) -> RunResult:
    agent = Agent(name="bot", model=model, instructions="Be kind.",
                  context_providers=providers)
    return await agent.run("where is my refund?", run_context=run_context())


async def test_every_encoder_writes_the_result_without_the_run_contexts_secrets(
        model: Any) -> None:
    result = await run(model, [Notes()])
    assert result.run_context.dependencies["openai_key"] == DEP_SECRET  # it is there
    for serialized in (json.dumps(result), result.to_json(), json.dumps(result.to_dict()),
                       pydantic_core.to_json(result)):
        assert_clean(serialized)
        data = json.loads(serialized)
        assert data["output"] == result.output and data["run_id"] == "run-1"
        assert data["context_report"]["outcomes"][0]["status"] == "fired"
        assert "run_context" not in data and "dependencies" not in json.dumps(data)
    # What json.dumps(result) writes is exactly the result's JSON view.
    assert json.loads(json.dumps(result)) == json.loads(result.to_json())


async def test_a_failing_providers_message_does_not_carry_the_secrets_out(
        model: Any) -> None:
    result = await run(model, [LeakyProvider(), Notes()])
    report = result.context_report
    assert report is not None and report.outcomes[0].status is Status.FAILED
    for serialized in (json.dumps(result), result.to_json(), pydantic_core.to_json(result)):
        assert_clean(serialized)
        row = json.loads(serialized)["context_report"]["outcomes"][0]
        # The row still says what happened, with the secrets taken out.
        assert row["error_type"] == "ConnectionError"
        assert row["reason"].startswith("ConnectionError: auth failed with key [redacted]")
        assert "postgres://svc:[redacted]@db.internal/billing" in row["reason"]


async def test_the_dataclass_path_and_attribute_changes_do_not_reach_the_secrets(
        model: Any) -> None:
    result = await run(model, [Notes()])
    # A walker that turns dataclasses into dicts first (as web encoders do) gets no
    # dataclass here: it takes the mapping path, the JSON view.
    assert not dataclasses.is_dataclass(result)
    with pytest.raises(TypeError):
        dataclasses.asdict(result)  # type: ignore[call-overload]
    assert_clean(json.dumps(dict(result)))
    # The report under the view (a dataclass, walked field by field) holds no run
    # context either.
    assert result.context_report is not None
    assert not dataclasses.is_dataclass(result.context_report)
    assert_clean(pydantic_core.to_json(dataclasses.asdict(result.context_report.report)))
    # A run context swapped in later is not written out either; the view follows it.
    result.run_context = RunContext(run_id="run-2", dependencies={"k": DEP_SECRET})
    assert_clean(json.dumps(result))
    assert result["run_id"] == "run-2"
    result.output = "edited"
    assert json.loads(json.dumps(result))["output"] == "edited"


async def test_a_logged_result_shows_no_secret(model: Any,
                                               caplog: pytest.LogCaptureFixture) -> None:
    result = await run(model, [LeakyProvider(), Notes()])
    with caplog.at_level(logging.INFO, logger="app"):
        logging.getLogger("app").info("run finished: %r / %s", result, result)
    logged = [r.getMessage() for r in caplog.records if r.name == "app"]
    assert len(logged) == 1 and "billing: failed" in logged[0]
    assert_clean(logged[0])
    assert_clean(repr(result.run_context))


SECRET = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=6,
                 max_size=24).map(lambda s: f"S3C-{s}")


def nested(secret: str, depth: int) -> Any:
    """``secret`` wrapped ``depth`` times in dicts and lists, alternately."""
    value: Any = secret
    for level in range(depth):
        value = {"v": value} if level % 2 else [value]
    return value


@st.composite
def held_secrets(draw: st.DrawFn) -> tuple[RunContext, list[str]]:
    secrets = draw(st.lists(SECRET, min_size=1, max_size=5, unique=True))
    held: dict[str, Any] = {"dependencies": {}, "metadata": {},
                            "session_state": {}, "extra": {}}
    for i, secret in enumerate(secrets):
        place = draw(st.sampled_from(sorted(held)))
        held[place][f"k{i}"] = nested(secret, draw(st.integers(0, 4)))
    return RunContext(user_id="u1", **held), secrets


class Quoting:
    """Fails quoting every string its run context holds (as a careless driver might)."""

    name = "quoting"

    async def fetch(self, query: str, ctx: Any) -> str:
        found = [ctx.dependencies, ctx.metadata, ctx.session_state, ctx.extra]
        raise RuntimeError(f"cannot connect: {found!r}")


@given(held=held_secrets())
@settings(max_examples=40, deadline=None)
def test_no_held_value_reaches_any_serialization(held: tuple[RunContext, list[str]]) -> None:
    ctx, secrets = held
    report = asyncio.run(resolve_context([Quoting(), Notes()], "q", ctx))
    assert report.outcomes[0].status is Status.FAILED
    assert all(s in (report.outcomes[0].reason or "") for s in secrets)  # the bait is set
    result = RunResult("reply", None, report, [{"role": "user", "content": "q"}],
                       context=report.text, run_context=ctx, agent="bot")
    for serialized in (json.dumps(result), result.to_json(), pydantic_core.to_json(result),
                       json.dumps(result.to_dict()), repr(result)):
        text = serialized.decode() if isinstance(serialized, bytes) else serialized
        assert not [s for s in secrets if s in text]

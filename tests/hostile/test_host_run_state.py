"""State a host integration keeps past a run: what a Pydantic AI run leaves behind to
find its report by ``run_id`` (a run_id that concurrent runs share included) goes when
the runs end; a run sharing an id never reads another run's report."""

from __future__ import annotations

import gc

import anyio
import pytest
from lionctx.integrations import pydantic_ai as pai

pytestmark = pytest.mark.anyio


class Named:
    name = "notes"
    context_fields = ("user_id",)

    async def fetch(self, query, ctx):
        return f"notes of {getattr(ctx, 'user_id', None)}"


def pydantic_agent(server, instructions):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("m", provider=OpenAIProvider(base_url=server.base_url, api_key="k"))
    return Agent(model, deps_type=dict, instructions=instructions)


async def _shared_runs(agent, run_id, users):
    results = {}

    async def run(user):
        results[user] = await agent.run("hi", deps={"user_id": user}, run_id=run_id)

    async with anyio.create_task_group() as tg:
        for user in users:
            tg.start_soon(run, user)
    return results


# Each test's runs on an event loop of their own: a loop's cancelled timers hold the
# host's own run context (Pydantic AI's context variable) until they are due or the
# loop ends; what is asserted is that lionctx keeps nothing once the host lets go.

def test_a_run_id_concurrent_runs_share_is_forgotten_when_they_end(server):
    async def runs():
        agent = pydantic_agent(server, [pai.context_instructions([Named()])])
        results = await _shared_runs(agent, "request-1", ("alice", "bob"))
        assert "request-1" in pai._BY_RUN_ID, "while the runs live, the id is known shared"
        for user, result in results.items():
            assert pai.report(result).outcomes[0].text.endswith(f"notes of {user}\n</context>")

    anyio.run(runs)
    gc.collect()
    assert "request-1" not in pai._BY_RUN_ID, "the runs ended: nothing of them is kept"


def test_a_flood_of_shared_run_ids_leaves_nothing_behind(server):
    async def runs():
        agent = pydantic_agent(server, [pai.context_instructions([Named()])])
        for i in range(30):
            await _shared_runs(agent, f"flood-{i}", ("a", "b", "c"))

    anyio.run(runs)
    gc.collect()
    assert not [k for k in pai._BY_RUN_ID if k.startswith("flood-")]


class Usage:
    """A run's usage object, as the host gives each run its own."""


class Run:
    def __init__(self, run_id):
        self.run_id = run_id
        self.usage = Usage()


async def test_a_run_sharing_an_id_after_others_ended_still_reads_no_other_report():
    hook = pai.context_instructions([Named()])
    a, b, c = Run("r"), Run("r"), Run("r")
    for run in (a, b, c):
        await hook(run)
    del a, b, run
    gc.collect()
    late = Run("r")  # another run given the same id while c still lives
    await hook(late)
    streamed = Run("r")  # c's streamed result: a usage object made anew
    assert pai.report(streamed) is None, "never the late run's report: the id is shared"
    assert pai.report(late) is not None and pai.report(c) is not None
    del c, late, streamed
    gc.collect()
    assert "r" not in pai._BY_RUN_ID


def test_runs_sharing_one_usage_object_keep_a_bounded_number_of_reports(server):
    # A host that passes one usage= to every run of a conversation (to add its usage
    # up) keeps that object alive: what lionctx ties to it must not grow per run.
    from lionctx.integrations._turns import _REPORTS, RUNS_PER_HOLDER
    from pydantic_ai.usage import RunUsage, UsageLimits

    async def runs():
        hook = pai.context_instructions([Named()])
        agent = pydantic_agent(server, [hook])
        usage = RunUsage()
        for i in range(RUNS_PER_HOLDER + 20):
            result = await agent.run("hi", deps={"user_id": f"u{i}"}, usage=usage,
                                     usage_limits=UsageLimits(request_limit=None))
            assert pai.report(result).outcomes[0].text.endswith(f"notes of u{i}\n</context>")
        assert len(hook._turns.get(usage)) <= RUNS_PER_HOLDER
        assert len(_REPORTS.get(usage)) <= RUNS_PER_HOLDER

    anyio.run(runs)

"""Attacks on cancellation: a provider's own CancelledError is its failure; the
caller's cancellation always reaches the caller, whatever a provider does with it."""

import asyncio

import anyio
import pytest
from agentium_compat import Agent, openai
from lionctx import (
    Branch,
    ContextProviderRegistry,
    Status,
    _gather,
    resolve_context,
    resolve_context_providers,
)

pytestmark = pytest.mark.anyio


class AwaitsCancelledShared:
    """Awaits a task that someone else cancels: CancelledError, yet nobody
    cancelled the turn."""

    name = "shared"

    async def _await_shared(self):
        shared = asyncio.ensure_future(asyncio.sleep(10))
        asyncio.get_running_loop().call_soon(shared.cancel)
        return await shared

    async def provide(self, branch, instruction):
        return await self._await_shared()

    async def fetch(self, query, ctx):
        return await self._await_shared()


class Fine:
    name = "fine"

    async def provide(self, branch, instruction):
        return "ok"

    async def fetch(self, query, ctx):
        return "ok"


@pytest.mark.parametrize("concurrent", [False, True])
@pytest.mark.parametrize("timeout", [None, 5])
async def test_a_providers_own_cancelled_error_is_its_failed_row(concurrent, timeout):  # noqa: ASYNC109 - parametrized registry setting
    reg = ContextProviderRegistry(concurrent=concurrent, timeout=timeout)
    reg.register(AwaitsCancelledShared())
    reg.register(Fine())
    report = await reg.gather(None, "q")
    shared, fine = report.outcomes
    assert shared.status is Status.FAILED and shared.error_type == "CancelledError"
    assert fine.status is Status.FIRED and report.failed == ["shared"]


async def test_resolve_context_providers_survives_a_providers_cancelled_error():
    text = await resolve_context_providers([AwaitsCancelledShared(), Fine()], "q")
    assert text == '<context name="fine">\nok\n</context>'
    res = await resolve_context([AwaitsCancelledShared(), Fine()], "q", timeout=5)
    assert [o.status for o in res.outcomes] == [Status.FAILED, Status.FIRED]


class Swallows:
    """Catches the caller's cancellation and answers anyway."""

    def __init__(self):
        self.started = asyncio.Event()
        self.swallowed = False

    name = "swallower"

    async def _body(self):
        self.started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.swallowed = True
            return "answered after being cancelled"
        return "never"

    async def provide(self, branch, instruction):
        return await self._body()

    async def fetch(self, query, ctx):
        return await self._body()


async def _cancel_while_running(turn, provider):
    task = asyncio.ensure_future(turn())
    await provider.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.swallowed


@pytest.mark.parametrize("concurrent", [False, True])
@pytest.mark.parametrize("timeout", [None, 5])
async def test_branch_turn_is_cancelled_even_if_a_provider_swallows_it(server, concurrent,
                                                                        timeout):  # noqa: ASYNC109 - parametrized registry setting
    from lionctx import OpenAIChatModel

    model = OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0)
    branch = Branch("sys", model)
    branch.providers.concurrent = concurrent
    branch.providers.timeout = timeout
    provider = Swallows()
    branch.providers.register(provider)
    branch.providers.register(Fine())
    await _cancel_while_running(lambda: branch.chat("q"), provider)
    assert server.requests == []          # the model was never called
    assert [m["role"] for m in branch.messages] == ["system"]  # nothing stored


async def test_communicate_is_cancelled_even_if_a_provider_swallows_it(server):
    from lionctx import OpenAIChatModel

    branch = Branch("sys", OpenAIChatModel("m", base_url=server.base_url, api_key="k"))
    provider = Swallows()
    branch.providers.register(provider)
    await _cancel_while_running(lambda: branch.communicate("q"), provider)
    assert server.requests == [] and len(branch.messages) == 1


async def test_agent_run_is_cancelled_even_if_a_provider_swallows_it(server):
    provider = Swallows()
    agent = Agent(name="a", model=openai("m", base_url=server.base_url, api_key="k"),
                  instructions=lambda c: c.context, context_providers=[provider, Fine()])
    await _cancel_while_running(lambda: agent.run("q"), provider)
    assert server.requests == []


async def test_an_anyio_cancel_scope_also_reaches_the_caller():
    provider = Swallows()
    reg = ContextProviderRegistry()
    reg.register(provider)
    reg.register(Fine())
    after = []
    with anyio.move_on_after(0.05) as scope:
        await reg.gather(None, "q")
        after.append("ran on")  # must not run: the scope was cancelled
    assert scope.cancelled_caught and provider.swallowed and after == []


class CancelsTheOthers:
    """Cancels every other task of the pass, the ones not started yet too (a pass
    started with no task group must still see each of them end)."""

    name = "saboteur"

    def __init__(self) -> None:
        self.outside: set = set()  # the tasks that are not the pass's

    async def fetch(self, query, ctx):
        mine = asyncio.current_task()
        for task in asyncio.all_tasks() - self.outside:
            if task is not mine:
                task.cancel()
        return "done"


class Named:
    def __init__(self, name: str) -> None:
        self.name = name

    async def fetch(self, query, ctx):
        return f"{self.name} ok"


@pytest.mark.parametrize("timeout", [None, 5])
async def test_a_provider_cancelling_the_other_providers_tasks_costs_their_rows_only(timeout):  # noqa: ASYNC109 - the face's own setting
    caller = asyncio.current_task()
    assert caller is not None
    before = [Named(f"b{i}") for i in range(3)]  # done before the saboteur runs
    after = [Named(f"a{i}") for i in range(70)]  # not started yet: one batch and the next
    saboteur = CancelsTheOthers()
    saboteur.outside = asyncio.all_tasks()
    providers = [*before, saboteur, *after]
    with anyio.fail_after(30):  # a pass waiting on a task that never ran would hang here
        res = await resolve_context(providers, "q", timeout=timeout)
    rows = {o.name: o for o in res.outcomes}
    assert rows["saboteur"].status is Status.FIRED
    assert all(rows[p.name].status is Status.FIRED for p in before)
    cancelled = [rows[p.name] for p in after if rows[p.name].status is not Status.FIRED]
    assert cancelled, "the saboteur cancelled tasks that had not run yet"
    assert all(o.status is Status.FAILED and o.error_type == "CancelledError" for o in cancelled)
    assert not caller.cancelling()  # the caller was never cancelled


class Hangs:
    def __init__(self, name: str) -> None:
        self.name = name

    async def fetch(self, query, ctx):
        await asyncio.sleep(30)


@pytest.mark.parametrize("timeout", [None, 5])
async def test_an_outer_timeout_ends_a_concurrent_pass_and_the_task_goes_on(timeout):  # noqa: ASYNC109 - the face's own setting
    """asyncio.timeout and anyio's scopes around a concurrent pass (more providers than
    a batch) end it as theirs, and leave the caller's task uncancelled: its next pass
    runs whole (asyncio.timeout tells its own cancellation by the task's count)."""
    caller = asyncio.current_task()
    assert caller is not None
    outside = asyncio.all_tasks()
    hanging = [Hangs(f"h{i}") for i in range(100)]
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await resolve_context(hanging, "q", timeout=timeout)
    assert caller.cancelling() == 0
    with anyio.move_on_after(0.05) as scope:
        await resolve_context(hanging, "q", timeout=timeout)
    assert scope.cancelled_caught and caller.cancelling() == 0
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.05):
            await resolve_context(hanging, "q", timeout=timeout)
    assert caller.cancelling() == 0
    assert asyncio.all_tasks() <= outside, "no provider's task outlives its pass"
    res = await resolve_context([Fine()], "q", timeout=timeout)
    assert [o.status for o in res.outcomes] == [Status.FIRED]


class SwallowsThenWaits:
    """Catches its timeout's cancellation, then waits on its source again."""

    name = "swallows-then-waits"

    def __init__(self, cleanup: float = 0.0) -> None:
        self.cleanup = cleanup
        self.cancelled = 0
        self.cancelled_again = 0
        self.cleaned = False

    async def fetch(self, query, ctx):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled += 1
        if self.cleanup:  # a cleanup it runs when cancelled, shorter than the grace
            with anyio.CancelScope(shield=True):
                await anyio.sleep(self.cleanup)
            self.cleaned = True
            raise asyncio.CancelledError
        try:
            await asyncio.sleep(30)  # the pass must not wait this out
        except asyncio.CancelledError:
            self.cancelled_again += 1
            raise
        return "never"


async def test_a_provider_that_swallows_the_shared_timeout_and_waits_again_is_cut_again():
    provider = SwallowsThenWaits()
    with anyio.fail_after(20):  # a guard against a hang only: the cause is asserted below
        res = await resolve_context([provider, Fine()], "q", timeout=0.1, breaker=False)
    assert provider.cancelled_again == 1, "the pass ended: the second wait was cancelled too"
    assert provider.cancelled == 1
    assert [o.status for o in res.outcomes] == [Status.TIMEOUT, Status.FIRED]


async def test_a_cleanup_run_on_the_shared_timeouts_cancellation_is_not_cut_short(monkeypatch):
    # the grace before the next cancel made far longer than the cleanup: a loaded machine
    # stalling the loop cannot make the test say what it does not
    monkeypatch.setattr(_gather, "RECANCEL", 30.0)
    provider = SwallowsThenWaits(cleanup=0.3)
    res = await resolve_context([provider, Fine()], "q", timeout=0.1, breaker=False)
    assert provider.cleaned, "the cleanup ran to its end: the next cancel waits a second"
    assert [o.status for o in res.outcomes] == [Status.TIMEOUT, Status.FIRED]

"""Cache-break baselines across users: a turn compares with the previous turn of its
own session, never with another user's.

The attack: two users take turns on one registry, one ``Agent`` or two branches over
one registry. Each user's context is byte-identical from turn to turn, so each of
their second turns is prefix-stable; comparing with "the previous turn of anyone"
reads the other user's blocks and reports a cache break that never happened (and
tells one user's turn about another user's blocks).
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
from agentium_compat import Agent, openai
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lionctx import (
    Branch,
    ContextProviderRegistry,
    InvalidType,
    RunContext,
    bind_run_context,
    resolve_context,
)
from lionctx._context import context_value
from lionctx._stability import PrefixHistory, compare, fingerprints, session_key

pytestmark = pytest.mark.anyio


class Profile:
    """A source whose text depends on who asks (the same for one user every turn)."""

    name = "profile"
    context_fields = ("tenant_id", "user_id")

    async def provide(self, branch: Any, instruction: Any) -> str:
        ctx = getattr(branch, "run_context", None)
        return self._text(ctx)

    async def fetch(self, query: str, ctx: Any) -> str:
        return self._text(ctx)

    @staticmethod
    def _text(ctx: Any) -> str:
        return (f"profile of {context_value(ctx, 'user_id')} "
                f"at {context_value(ctx, 'tenant_id')}")


class Rules:
    name = "rules"

    async def provide(self, branch: Any, instruction: Any) -> str:
        return "be kind"

    async def fetch(self, query: str, ctx: Any) -> str:
        return "be kind"


class Owner:
    """A conversation object the registry's pass is given (as a Branch would be)."""

    def __init__(self, **fields: Any) -> None:
        self.run_context = RunContext(**fields)


def shared_registry() -> ContextProviderRegistry:
    reg = ContextProviderRegistry(breaker=False)
    reg.register(Rules())
    reg.register(Profile())
    return reg


# --- one registry --------------------------------------------------------------------
async def test_two_users_interleaved_on_one_registry_each_stay_prefix_stable() -> None:
    reg = shared_registry()
    ann, bob = Owner(user_id="ann"), Owner(user_id="bob")
    assert (await reg.gather(ann, None)).prefix_stable is None
    assert (await reg.gather(bob, None)).prefix_stable is None, "bob has no previous turn"
    for _ in range(2):
        for who in (ann, bob):
            report = await reg.gather(who, None)
            assert report.prefix_stable is True and report.cache_break is None


async def test_two_users_bound_by_run_context_on_one_registry() -> None:
    reg = shared_registry()
    seen = []
    for _ in range(2):
        for user in ("ann", "bob"):
            with bind_run_context(user_id=user, tenant_id="acme"):
                seen.append((await reg.gather(None, None)).prefix_stable)
    assert seen == [None, None, True, True]


async def test_two_branches_of_two_users_over_one_registry(model, server) -> None:
    reg = shared_registry()
    ann = Branch("sys", model, run_context={"user_id": "ann"})
    bob = Branch("sys", model, run_context={"user_id": "bob"})
    ann._context_providers = bob._context_providers = reg  # LionAGI's registry slot
    stable = []
    for _ in range(2):
        for branch in (ann, bob):
            await branch.chat("hi")
            assert branch.last_context_report is not None
            stable.append(branch.last_context_report.prefix_stable)
    assert stable == [None, None, True, True]


async def test_two_anonymous_branches_over_one_registry_are_two_sessions(model, server) -> None:
    # No ids at all: each branch is its own conversation. Their texts differ (the
    # branch's name is in the profile), so one branch's turn must not read the other's.
    class Named:
        name = "named"

        async def provide(self, branch: Any, instruction: Any) -> str:
            return f"notes of {branch.name}"

    reg = ContextProviderRegistry(breaker=False)
    reg.register(Named())
    one, two = Branch("sys", model, name="one"), Branch("sys", model, name="two")
    one._context_providers = two._context_providers = reg
    stable = []
    for _ in range(2):
        for branch in (one, two):
            await branch.chat("hi")
            assert branch.last_context_report is not None
            stable.append(branch.last_context_report.prefix_stable)
    assert stable == [None, None, True, True]


# --- one Agent -------------------------------------------------------------------------
async def test_two_users_interleaved_on_one_agent_each_stay_prefix_stable(server) -> None:
    agent = Agent(name="a", model=openai("m", base_url=server.base_url), instructions="i",
                  context_providers=[Rules(), Profile()], context_breaker=False)
    stable = []
    for _ in range(2):
        for user in ("ann", "bob"):
            result = await agent.run("hi", user_id=user)
            assert result.context_report is not None
            stable.append(result.context_report.prefix_stable)
    assert stable == [None, None, True, True]


async def test_the_same_session_id_in_two_tenants_is_two_sessions(server) -> None:
    # Session ids are often small numbers, unique only within a tenant.
    agent = Agent(name="a", model=openai("m", base_url=server.base_url), instructions="i",
                  context_providers=[Profile()], context_breaker=False)
    stable = []
    for _ in range(2):
        for tenant in ("acme", "globex"):
            result = await agent.run("hi", tenant_id=tenant, session_id="1")
            assert result.context_report is not None
            stable.append(result.context_report.prefix_stable)
    assert stable == [None, None, True, True]


# --- resolve_context with a baseline store (what a host keeps) ---------------------------
async def test_resolve_context_reads_and_records_the_sessions_baseline() -> None:
    store = PrefixHistory()
    stable = []
    for _ in range(2):
        for user in ("ann", "bob"):
            res = await resolve_context([Rules(), Profile()], "q", {"user_id": user},
                                        baselines=store, breaker=False)
            stable.append(res.prefix_stable)
    assert stable == [None, None, True, True]
    # bob's was last: his baseline is this pass's blocks, ann's another's
    shown = fingerprints(res.outcomes)
    assert compare(store.latest(session_key({"user_id": "bob"})), shown) is None
    assert compare(store.latest(session_key({"user_id": "ann"})), shown) is not None
    with pytest.raises(InvalidType, match="previous or baselines"):
        await resolve_context([Rules()], "q", previous=res, baselines=store)


# --- bounded, and never inherited ---------------------------------------------------------
async def test_baselines_are_bounded_least_recent_session_first() -> None:
    reg = ContextProviderRegistry(breaker=False, max_sessions=2)
    reg.register(Profile())
    for user in ("ann", "bob", "cy"):
        with bind_run_context(user_id=user):
            await reg.gather(None, None)
    assert len(reg._baselines) == 2
    with bind_run_context(user_id="ann"):
        assert (await reg.gather(None, None)).prefix_stable is None, "ann's was dropped"
    with pytest.raises(InvalidType, match="max_sessions"):
        ContextProviderRegistry(max_sessions="many")  # type: ignore[arg-type]


async def test_a_new_conversation_never_inherits_a_dead_ones_baseline() -> None:
    # A new object may take a freed one's address: its key must still be new.
    reg = ContextProviderRegistry(breaker=False)
    reg.register(Rules())
    for _ in range(50):
        owner = Owner()
        assert (await reg.gather(owner, None)).prefix_stable is None
        del owner
        gc.collect()


# --- the property ----------------------------------------------------------------------
ids = st.sampled_from([None, "1", "ann", "bob"])
contexts = st.fixed_dictionaries({"tenant_id": ids, "user_id": ids, "session_id": ids})


@settings(max_examples=150, deadline=None)
@given(contexts, contexts)
async def test_no_baseline_written_under_one_run_context_is_read_under_another(
        one: dict[str, Any], two: dict[str, Any]) -> None:
    assume((one["tenant_id"], one["user_id"]) != (two["tenant_id"], two["user_id"]))
    assert session_key(one) != session_key(two)
    reg = shared_registry()
    with bind_run_context(**one):
        await reg.gather(None, None)
    with bind_run_context(**two):
        report = await reg.gather(None, None)
    assert report.prefix_stable is None and report.cache_break is None
    store = PrefixHistory()
    store.swap(session_key(one), (("profile", "d1"),))
    assert store.latest(session_key(two)) is None
    res = await resolve_context([Profile()], "q", two, baselines=store, breaker=False)
    assert res.prefix_stable is None


# --- the texts compared: fingerprints a text cannot choose ---------------------------------
class SameHash(str):
    """A text whose own ``__hash__`` says it never changes."""

    def __hash__(self) -> int:
        return 0


class Changing:
    name = "status"

    def __init__(self) -> None:
        self.turn = 0

    async def provide(self, branch: Any, instruction: Any) -> str:
        self.turn += 1
        return SameHash(f"status {self.turn}")


async def test_a_text_that_claims_one_hash_still_breaks_the_cache_when_it_changes() -> None:
    reg = ContextProviderRegistry(breaker=False)
    reg.register(Rules())
    reg.register(Changing())
    await reg.gather(None, None)
    second = await reg.gather(None, None)
    assert second.prefix_stable is False
    assert second.cache_break is not None and second.cache_break.name == "status"
    assert second.cache_break.kind == "changed"


async def test_a_baseline_of_digests_kept_from_another_process_is_compared_as_digests() -> None:
    # A host that stored last turn's digests (they are the same in every process) and
    # seeds its baseline store with them: the next turn compares with them as digests.
    first = await resolve_context([Rules(), Profile()], "q", {"user_id": "ann"},
                                  breaker=False)
    store = PrefixHistory()
    store.swap(session_key({"user_id": "ann"}), first.digests)
    again = await resolve_context([Rules(), Profile()], "q", {"user_id": "ann"},
                                  baselines=store, breaker=False)
    assert again.prefix_stable is True and again.cache_break is None
    store.swap(session_key({"user_id": "bob"}), first.digests)  # ann's blocks
    bob = await resolve_context([Rules(), Profile()], "q", {"user_id": "bob"},
                                baselines=store, breaker=False)
    assert bob.prefix_stable is False and bob.cache_break is not None
    assert (bob.cache_break.name, bob.cache_break.kind) == ("profile", "changed")

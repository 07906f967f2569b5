"""Prompt-cache stability: digests, volatile order, the cache-break report."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import Branch, CacheBreak, ContextProviderRegistry, Status, resolve_context
from lionctx._render import join_tagged, tag_block
from lionctx._stability import PrefixHistory, compare, digest, session_key

pytestmark = pytest.mark.anyio


class Box:
    """A provider whose text the test sets between turns (``None``: nothing)."""

    def __init__(self, name: str, text: str | None, volatile: bool = False) -> None:
        self.name, self.text, self.volatile = name, text, volatile

    async def provide(self, branch, instruction):
        return self.text

    async def fetch(self, query, ctx):
        return self.text


# --- pure functions ----------------------------------------------------------------
def test_digest_is_stable_and_distinguishes():
    assert digest("abc") == digest("abc") and len(digest("abc")) == 16
    assert digest("abc") != digest("abd")
    assert digest("\ud800") != digest("")  # lone surrogates digest, not raise


@pytest.mark.parametrize("prev, cur, want", [
    (None, (("a", "1"),), None),
    ((("a", "1"),), (("a", "1"),), None),
    ((("a", "1"), ("b", "2")), (("a", "1"), ("b", "3")), CacheBreak("b", "changed", 1)),
    ((("a", "1"),), (("a", "1"), ("b", "2")), CacheBreak("b", "appeared", 1)),
    ((("a", "1"), ("b", "2")), (("a", "1"),), CacheBreak("b", "vanished", 1)),
    ((("a", "1"), ("b", "2")), (("b", "2"), ("a", "1")), CacheBreak("b", "moved", 0)),
    ((("a", "1"), ("b", "2")), (("c", "9"), ("a", "1"), ("b", "2")),
     CacheBreak("c", "appeared", 0)),
    ((("a", "1"), ("b", "2")), (("b", "2"),), CacheBreak("a", "vanished", 0)),
    ((), (("a", "1"),), CacheBreak("a", "appeared", 0)),
])
def test_compare_examples(prev, cur, want):
    assert compare(prev, cur) == want


_SEQ = st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from("0123")), max_size=6,
                unique_by=lambda t: t[0]).map(tuple)


@settings(max_examples=300, deadline=None)
@given(prev=_SEQ, cur=_SEQ)
def test_reported_first_change_is_exactly_the_first_differing_block(prev, cur):
    brk = compare(prev, cur)
    if prev == cur:
        assert brk is None
        return
    first = next((i for i, (p, c) in enumerate(zip(prev, cur, strict=False)) if p != c),
                 min(len(prev), len(cur)))
    assert brk is not None and brk.index == first
    assert prev[:first] == cur[:first]
    names_before = {n for n, _ in prev}
    names_after = {n for n, _ in cur}
    if brk.kind == "changed":
        assert prev[first][0] == cur[first][0] == brk.name and prev[first] != cur[first]
    elif brk.kind == "appeared":
        assert brk.name == cur[first][0] and brk.name not in names_before
    elif brk.kind == "vanished":
        assert brk.name == prev[first][0] and brk.name not in names_after
    else:
        assert brk.kind == "moved" and brk.name in names_before and brk.name in names_after


def test_prefix_history_is_bounded_and_swaps():
    h = PrefixHistory(max_sessions=2)
    assert h.swap("s1", (("a", "1"),)) is None
    assert h.swap("s1", (("a", "2"),)) == (("a", "1"),)
    h.swap("s2", ())
    h.swap("s3", ())
    assert h.swap("s1", ()) is None, "least recent session dropped"
    h.forget("s3")
    assert h.swap("s3", ()) is None


# --- the registry / branch face ------------------------------------------------------
async def test_registry_reports_stable_prefix_then_the_first_changed_block():
    reg = ContextProviderRegistry()
    notes, status = Box("notes", "n1"), Box("status", "up")
    reg.register(notes)
    reg.register(status)
    first = await reg.gather(None, None)
    assert first.prefix_stable is None and first.cache_break is None
    assert [o.digest for o in first.outcomes] == [digest("n1"), digest("up")]
    again = await reg.gather(None, None)
    assert again.prefix_stable is True and again.cache_break is None
    status.text = "down"
    changed = await reg.gather(None, None)
    assert changed.prefix_stable is False
    assert changed.cache_break == CacheBreak("status", "changed", 1)
    assert changed.to_dict()["cache_break"] == {"name": "status", "kind": "changed", "index": 1}
    notes.text = None
    gone = await reg.gather(None, None)
    assert gone.cache_break == CacheBreak("notes", "vanished", 0)


async def test_volatile_blocks_render_after_stable_ones_on_a_tags_branch(server):
    from lionctx import OpenAIChatModel

    model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")
    branch = Branch("sys", model)
    clock = Box("clock", "t=1", volatile=True)
    branch.providers.register(clock)  # volatile from the provider's attribute
    branch.providers.register(Box("notes", "n"))
    branch.providers.register(Box("feed", "f1"), volatile=True)
    branch.providers.register(Box("profile", "p"))
    await branch.chat("hi")
    report = branch.last_context_report
    assert report.names == ["clock", "notes", "feed", "profile"], "report keeps LionAGI order"
    system = server.requests[-1]["messages"][0]["content"]
    want = "sys\n\n" + join_tagged([tag_block("notes", "n"), tag_block("profile", "p"),
                                    tag_block("clock", "t=1"), tag_block("feed", "f1")])
    assert system == want
    clock.text = "t=2"
    await branch.chat("hi")
    second = server.requests[-1]["messages"][0]["content"]
    cut = want.index('<context name="clock">')
    assert second[:cut] == want[:cut], "a volatile change leaves the stable prefix alone"
    assert branch.last_context_report.cache_break == CacheBreak("clock", "changed", 2)


async def test_lionagi_render_keeps_registration_order(server):
    from lionctx import OpenAIChatModel

    model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")
    branch = Branch("sys", model, render="lionagi")
    branch.providers.register(Box("clock", "t", volatile=True))
    branch.providers.register(Box("notes", "n"))
    await branch.chat("hi")
    user = server.requests[-1]["messages"][0]["content"]
    assert user.startswith("sys" + "t\nn")


@settings(max_examples=60, deadline=None)
@given(stable=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=4),
       vol1=st.lists(st.one_of(st.none(), st.text(min_size=1, max_size=8)), max_size=3),
       vol2=st.lists(st.one_of(st.none(), st.text(min_size=1, max_size=8)), max_size=3),
       interleave=st.randoms(use_true_random=False))
def test_volatile_changes_never_touch_the_stable_bytes(stable, vol1, vol2, interleave):
    """Same inputs, same bytes; changing only volatile sources keeps every stable
    block's bytes (and the whole prefix up to the first volatile block) unchanged."""
    n = max(len(vol1), len(vol2))
    vol1 = vol1 + [None] * (n - len(vol1))
    vol2 = vol2 + [None] * (n - len(vol2))
    providers = [Box(f"s{i}", t) for i, t in enumerate(stable)]
    volatile = [Box(f"v{i}", t, volatile=True) for i, t in enumerate(vol1)]
    mixed = providers + volatile
    interleave.shuffle(mixed)

    async def run():
        out = []
        for values in (vol1, vol1, vol2):
            for box, value in zip(volatile, values, strict=True):
                box.text = value
            res = await resolve_context(mixed, "q", breaker=False)
            out.append(res.text)
        return out

    a, b, c = anyio.run(run)
    assert a == b
    stable_part = join_tagged(tag_block(p.name, p.text) for p in mixed if not p.volatile)
    assert a.startswith(stable_part) and c.startswith(stable_part)


# --- the agentium face ----------------------------------------------------------------
async def test_resolve_context_previous_gives_the_cache_break():
    notes, status = Box("notes", "n"), Box("status", "up")
    first = await resolve_context([notes, status], "q")
    assert first.digests == (("notes", digest(tag_block("notes", "n"))),
                             ("status", digest(tag_block("status", "up"))))
    same = await resolve_context([notes, status], "q", previous=first)
    assert same.prefix_stable is True and same.cache_break is None
    status.text = "down"
    moved = await resolve_context([status, notes], "q", previous=same)
    assert moved.cache_break == CacheBreak("status", "moved", 0)
    with pytest.raises(TypeError, match="previous"):
        await resolve_context([notes], "q", previous="nope")


async def test_agent_keeps_previous_digests_per_session(server):
    from agentium_compat import Agent, openai

    status = Box("status", "up")
    agent = Agent(name="a", model=openai("m", base_url=server.base_url), instructions="i",
                  context_providers=[Box("notes", "n"), status])
    r1 = await agent.run("q", session_id="s1")
    assert r1.context_report.prefix_stable is None
    r2 = await agent.run("q", session_id="s1")
    assert r2.context_report.prefix_stable is True
    status.text = "down"
    r3 = await agent.run("q", session_id="s1")
    assert r3.context_report.cache_break == CacheBreak("status", "changed", 1)
    other = await agent.run("q", session_id="s2")
    assert other.context_report.prefix_stable is None, "sessions do not share history"
    assert [o.status for o in r3.context_report.outcomes] == [Status.FIRED, Status.FIRED]


class Moody(Box):
    """``volatile`` is a property that raises: it declares nothing."""

    @property  # type: ignore[override]
    def volatile(self):
        raise RuntimeError("no idea")

    @volatile.setter
    def volatile(self, value):
        pass


async def test_resolve_reads_volatile_flags_even_when_one_property_raises():
    providers = [Box("clock", "t=1", volatile=True), Moody("moody", "m"),
                 Box("plan", "p"), Box("also", "a", volatile=1)]  # 1 is not True
    res = await resolve_context(providers, "q")
    assert [o.volatile for o in res.outcomes] == [True, False, False, False]
    assert res.text == join_tagged([tag_block("moody", "m"), tag_block("plan", "p"),
                                    tag_block("also", "a"), tag_block("clock", "t=1")])


# --- per-session baselines ---------------------------------------------------------------
def test_session_key_separates_tenants_users_sessions_and_conversations():
    from lionctx import bind_run_context
    from lionctx._stability import session_key

    class Conv:
        pass

    a, b = Conv(), Conv()
    assert session_key({"user_id": "u"}) == session_key({"userId": "u"})
    assert session_key({"user_id": 1}) != session_key({"user_id": "1"})
    assert session_key({"session_id": "1", "tenant_id": "t1"}) != \
        session_key({"session_id": "1", "tenant_id": "t2"})
    assert session_key(None, a) != session_key(None, b)
    assert session_key(None, a) == session_key(None, a)
    assert session_key({"session_id": "s"}, a) == session_key({"session_id": "s"}, b), \
        "a session id names the session whatever object carries it"
    with bind_run_context(user_id="u"):
        assert session_key(None) == session_key({"user_id": "u"})
    assert session_key(None, object.__new__(object)) == session_key(None), \
        "an owner that cannot be weakly keyed stands for nothing"


def test_prefix_history_previous_and_record_by_run_context():
    h = PrefixHistory()
    assert h.swap(session_key({"user_id": "u1"}), (("a", "1"),)) is None
    assert h.latest(session_key({"user_id": "u1"})) == (("a", "1"),)
    assert h.latest(session_key({"user_id": "u2"})) is None
    assert h.swap(session_key({"user_id": "u1"}), (("a", "2"),)) == (("a", "1"),)
    assert len(h) == 1


@pytest.mark.parametrize("bad", [0, -1, True, "10", None])
def test_prefix_history_bound_is_checked(bad):
    from lionctx import InvalidType, InvalidValue

    with pytest.raises((InvalidType, InvalidValue), match="max_sessions"):
        PrefixHistory(bad)


def test_owners_that_compare_by_value_keep_their_own_baselines() -> None:
    # An owner such as a pydantic model (a real lionagi.Branch) is unhashable and
    # compares by value: each one still stands for its own conversation.
    class Owner:
        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Owner)

    a, b = Owner(), Owner()
    ctx = {"user_id": "u1"}
    assert session_key(ctx, a) == session_key(ctx, a)
    assert session_key(ctx, a) != session_key(ctx, b)

"""Run-context values named by an address: one user's state read by the next object there.

A host may put an object in a run-context field (``user_id=current_user``, an ORM row
whose class keeps ``object.__repr__``). Its ``repr`` is only its memory address, and
once the request ends and the object is freed, the next user's object is often made at
that very address. State kept under that text (a cached answer of a per-user source, a
failing caller's circuit, a session's cache-break baseline) would then belong to
whoever lands there next. Each attack frees one user's object, makes the next user's at
the same address, and checks that nothing of the first user's is read or held against
the second; the user's own object still finds its own state.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from lionctx import RunContext, Status, resolve_context
from lionctx._breaker import Breakers
from lionctx._scope import scope_of, scope_text
from lionctx._stability import PrefixHistory, session_key
from lionctx.cache import RedisCache
from lionctx.providers import CachedContextProvider, ContextSource, SourceUnavailable
from lionctx.testing._redis_server import LocalRedisServer

from tests.cache.conftest import namespace, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

T = TypeVar("T")


class User:
    """A user object as a host holds it: no ``__repr__`` of its own."""

    def __init__(self, name: str) -> None:
        self.name = name


def at_address(address: int, make: Callable[[], T]) -> tuple[T, list[T]]:
    """A new object made where a freed one lived (CPython reuses a freed block of the
    same size at once), with the others made on the way (kept alive)."""
    gc.collect()
    tried: list[T] = []
    for _ in range(10_000):
        made = make()
        if id(made) == address:
            return made, tried
        tried.append(made)
    # Another thread (a test server's) took the block first: the attack cannot be made.
    pytest.skip("no object was made at the freed address")


class Notes(ContextSource):
    """A per-user source: its text names the user asking."""

    name = "notes"
    context_fields: tuple[str, ...] = ("user_id",)

    def __init__(self) -> None:
        self.calls = 0

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        self.calls += 1
        return f"notes of {getattr(ctx.user_id, 'name', ctx.user_id)}"


async def test_a_cached_answer_is_not_served_to_the_next_user_at_the_same_address() -> None:
    source = Notes()  # its fields stated: the key is the query, after the field values
    cached = CachedContextProvider(source, 60, context_fields=("user_id",))
    alice = User("alice")
    first = await resolve_context([cached], "q", RunContext(user_id=alice))
    assert "notes of alice" in first.text
    again = await resolve_context([cached], "q", RunContext(user_id=alice))
    assert again.outcomes[0].cached and source.calls == 1  # her own entry serves her
    address = id(alice)
    del alice
    bob, _kept = at_address(address, lambda: User("bob"))
    res = await resolve_context([cached], "q", RunContext(user_id=bob))
    assert "notes of bob" in res.text, "bob was served alice's cached notes"
    assert not res.outcomes[0].cached and source.calls == 2


class Member:
    """A user object that compares by name (so not hashable) and prints as its address."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Member) and other.name == self.name

    __hash__ = None  # type: ignore[assignment]


async def test_an_unhashable_user_object_does_not_hand_its_entry_to_the_next_one_there(
        ) -> None:
    # No fields stated: the default key holds the ids themselves, an unhashable one
    # by its text (which must not be an address a later user takes).
    source = Notes()
    source.context_fields = ()
    cached = CachedContextProvider(source, 60)
    first = Member("alice")
    assert "notes of alice" in (await resolve_context([cached], "q", {"user_id": first})).text
    address = id(first)
    del first
    bob, _kept = at_address(address, lambda: Member("bob"))
    res = await resolve_context([cached], "q", {"user_id": bob})
    assert "notes of bob" in res.text, "bob was served alice's cached notes"


class Flaky(ContextSource):
    """Fails for alice only (her account is broken), answers everyone else."""

    name = "flaky"
    context_fields = ("user_id",)

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        if ctx.user_id.name == "alice":
            raise SourceUnavailable("alice's account is locked")
        return f"hello {ctx.user_id.name}"


async def test_a_freed_users_open_circuit_does_not_refuse_the_next_user_there() -> None:
    board, source = Breakers(), Flaky()
    alice = User("alice")
    for _ in range(4):
        res = await resolve_context([source], "q", RunContext(user_id=alice), breaker=board)
    assert res.outcomes[0].status is Status.SKIPPED  # her own circuit is open
    address = id(alice)
    del alice
    bob, _kept = at_address(address, lambda: User("bob"))
    res = await resolve_context([source], "q", RunContext(user_id=bob), breaker=board)
    assert res.outcomes[0].status is Status.FIRED, res.outcomes[0].reason
    assert "hello bob" in res.text


def test_a_session_baseline_is_not_the_next_users_at_the_same_address() -> None:
    store = PrefixHistory()
    alice = User("alice")
    store.swap(session_key({"user_id": alice, "session_id": "s"}), (("notes", "d1"),))
    assert store.latest(session_key({"user_id": alice, "session_id": "s"})) is not None
    address = id(alice)
    del alice
    bob, _kept = at_address(address, lambda: User("bob"))
    assert store.latest(session_key({"user_id": bob, "session_id": "s"})) is None


async def test_a_private_mcp_answer_is_not_served_to_the_next_user_at_the_same_address(
        ) -> None:
    # An MCP server marks its answer private (the SDK's default): kept per user, the
    # user named by the run context. An in-process server counts its reads.
    from lionctx import McpResourceProvider
    from lionctx.providers import close_mcp_connections

    from tests.providers.test_mcp_cache import counting_server

    p = McpResourceProvider(counting_server("private"), "notes://counter", cache_ttl=60)
    try:
        alice = User("alice")
        assert await p.retrieve("q", RunContext(user_id=alice)) == "read 1"
        assert await p.retrieve("q", RunContext(user_id=alice)) == "read 1"  # her own entry
        address = id(alice)
        del alice
        bob, _kept = at_address(address, lambda: User("bob"))
        assert await p.retrieve("q", RunContext(user_id=bob)) == "read 2", \
            "bob was served alice's private answer"
    finally:
        await close_mcp_connections()


class Stated(Notes):
    """The per-user source with a stated identity: shareable through Redis."""

    source_identity = "notes:by-user"


async def test_a_user_object_is_never_a_shared_key_in_redis(
        redis_server: LocalRedisServer, namespace: str) -> None:  # noqa: F811
    # Its name means something in this process alone: another worker holding an object
    # (or the next user at this address) must not meet its entries, so they stay here.
    import redis.asyncio as redis_asyncio

    cache = RedisCache(redis_server.url, namespace=namespace)
    source = Stated()
    p = CachedContextProvider(source, 60, cache=cache)
    try:
        alice = User("alice")
        assert await p.retrieve("q", RunContext(user_id=alice)) == "notes of alice"
        again = await p.retrieve("q", RunContext(user_id=alice))
        assert getattr(again, "cached", False) and source.calls == 1  # kept in this process
        assert await p.retrieve("q", RunContext(user_id="u1")) == "notes of u1"  # plain ids
        client = redis_asyncio.from_url(redis_server.url)
        keys = [k async for k in client.scan_iter(match=f"{namespace}:*")]
        await client.aclose()
        assert len([k for k in keys if b":val:" in k]) == 1, keys  # u1's entry alone
    finally:
        await cache.aclose()


# --- the naming itself, from other sides ------------------------------------------------
class Slotted:
    """No weak reference and no ``__repr__``: nothing can tell its life apart."""

    __slots__ = ()


def test_an_object_without_a_weak_reference_shares_nothing_even_with_itself() -> None:
    one = Slotted()
    assert scope_text(one) != scope_text(one)  # never cached rather than maybe another's


def test_values_with_a_repr_of_their_own_keep_it() -> None:
    # 1 and "1" stay apart, equal values share, as before
    for value in (None, 1, "1", 1.0, ("t", 2), frozenset({"x"})):
        assert scope_text(value) == repr(value)
    assert scope_of(Notes(), {"user_id": "u1"}) == (("user_id", "'u1'"),)


_CHILD = """
import os
from lionctx._scope import scope_text
class User: pass
pid = os.fork() if hasattr(os, "fork") else None
os.write(1, scope_text(User()).encode() + b"\\n")  # a forked worker's too
if pid == 0:
    os._exit(0)
if pid:
    os.waitpid(pid, 0)
"""


def test_an_object_named_in_one_process_is_not_named_so_in_another() -> None:
    # A shared cache keys on the scope text: two workers naming their own objects
    # (each process's first, as a counter would number them) never spell one name,
    # forked workers included.
    names: list[str] = []
    for _ in range(2):
        names += subprocess.run([sys.executable, "-c", _CHILD], capture_output=True,
                                text=True, check=True).stdout.splitlines()
    assert len(names) == (4 if hasattr(__import__("os"), "fork") else 2)
    assert len(set(names)) == len(names)


class Session:
    """A host's session object, as a host may map it to ``session_id``: no ``__repr__``."""


class Holder:
    """A host object one run's resolution is tied to."""


class Rules:
    name = "rules"

    async def fetch(self, query: str, ctx: Any) -> str:
        return "be kind"


async def test_a_hosts_new_session_at_a_dead_ones_address_has_no_baseline() -> None:
    from lionctx.integrations._turns import HostHook

    hook = HostHook([Rules()], timeout=None)  # no timer holds the run's context a while
    first = Session()
    await hook.resolve(Holder(), "q", RunContext(session_id=first))
    again = await hook.resolve(Holder(), "q", RunContext(session_id=first))
    assert again.prefix_stable is True  # its own baseline
    address = id(first)
    del first
    later, _kept = at_address(address, Session)
    fresh = await hook.resolve(Holder(), "q", RunContext(session_id=later))
    assert fresh.prefix_stable is None, "a new session read a dead one's baseline"

"""Hostile scope inputs: a provider declaring countless run-context fields, and run
contexts holding huge values (a ten-megabyte user id, a huge int, an object whose repr
is huge or raises). Scope text is a key of state that outlives a turn (cache entries,
breakers, baselines) and may reach log lines: it stays short, never holds a long value
itself, and keeps distinct values distinct."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import (
    Breakers,
    BreakerSettings,
    InvalidType,
    InvalidValue,
    RunContext,
    Status,
    resolve_context,
)
from lionctx._scope import MAX_FIELDS, MAX_SCOPE_CHARS, context_fields, scope_of, scope_text

from tests.cache.conftest import namespace, redis_server  # noqa: F401 - fixtures
from tests.fakes import Clock

pytestmark = pytest.mark.anyio


class CountedFields:
    """An iterable of field names that counts how many were read (and never ends)."""

    def __init__(self) -> None:
        self.read = 0

    def __iter__(self):
        while True:
            self.read += 1
            if self.read > 1_000_000:
                raise AssertionError("read a million field names")
            yield "user_id"


class Declares:
    name = "declares"

    def __init__(self, fields) -> None:
        self.context_fields = fields

    async def fetch(self, query, ctx):
        return "ok"


def test_endless_fields_are_refused_after_reading_past_the_bound():
    fields = CountedFields()
    with pytest.raises(InvalidValue, match=f"more than {MAX_FIELDS}") as err:
        context_fields(Declares(fields))
    assert fields.read <= MAX_FIELDS + 1
    assert len(str(err.value)) < 300, "the error names the bound, not every field"


def test_a_million_declared_fields_are_refused_with_a_short_message():
    with pytest.raises(InvalidValue, match="Declares") as err:
        context_fields(Declares(tuple(f"f{i}" for i in range(1_000_000))))
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("bad", [5, None, object(), ["user_id", 7]])
def test_fields_that_are_not_names_are_an_invalid_type(bad):
    with pytest.raises(InvalidType):
        context_fields(Declares(bad))


def test_the_bound_itself_is_accepted():
    names = tuple(f"f{i}" for i in range(MAX_FIELDS))
    assert context_fields(Declares(names)) == names
    assert context_fields(Declares(iter(names))) == names


async def test_a_provider_with_endless_fields_costs_no_turn(caplog):
    board = Breakers(BreakerSettings(threshold=1), clock=Clock())
    with caplog.at_level(logging.WARNING):
        res = await resolve_context([Declares(CountedFields())], "q",
                                    RunContext(user_id="u1"), breaker=board)
    assert res.outcomes[0].status is Status.FIRED
    assert "unreadable context_fields" in caplog.text


HUGE = "u" * 10_000_000


class HugeRepr:
    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"HugeRepr({self.n})" + "x" * 1_000_000


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def _never_holds(text: str, value: str) -> None:
    assert len(text) <= MAX_SCOPE_CHARS
    assert value[:MAX_SCOPE_CHARS // 2] not in text


@pytest.mark.parametrize("value", [HUGE, HUGE.encode(), [HUGE], {"id": HUGE}])
def test_a_huge_value_becomes_short_scope_text(value):
    text = scope_text(value)
    _never_holds(text, repr(value))


def test_huge_values_stay_distinct():
    assert scope_text(HUGE) != scope_text(HUGE + "v") != scope_text(HUGE[:-1] + "v")
    assert scope_text(HUGE) == scope_text("u" * 10_000_000), "equal values, equal text"
    assert scope_text(HugeRepr(1)) != scope_text(HugeRepr(2))
    assert scope_text(HUGE) != scope_text(HUGE.encode()), "a str is not its bytes"


def test_a_huge_int_is_scope_text_and_stays_distinct():
    big = 10 ** 5000  # more digits than int's repr allows
    text = scope_text(big)
    assert len(text) <= MAX_SCOPE_CHARS
    assert text == scope_text(10 ** 5000) != scope_text(big + 1)


def test_a_repr_that_raises_is_a_name_of_its_object_alone():
    a, b = BadRepr(), BadRepr()
    assert scope_text(a) == scope_text(a) != scope_text(b)
    assert "0x" in scope_text(a) and hex(id(a)) not in scope_text(a), "never its address"


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40),
       st.integers(min_value=0, max_value=3 * MAX_SCOPE_CHARS))
def test_long_values_that_differ_have_different_scope_text(a, b, pad):
    left, right = "p" * pad + a, "p" * pad + b
    assert (scope_text(left) == scope_text(right)) is (left == right)
    assert len(scope_text(left)) <= MAX_SCOPE_CHARS


@given(st.one_of(st.integers(), st.text(max_size=20), st.none(), st.booleans()))
def test_short_values_keep_their_repr(value):
    assert scope_text(value) == repr(value)


def test_a_scope_of_huge_ids_is_short():
    class Reads:
        context_fields = ("user_id", "tenant_id")

    scope = scope_of(Reads(), RunContext(user_id=HUGE, tenant_id=HUGE + "t"))
    assert sum(len(v) for _, v in scope) <= 2 * MAX_SCOPE_CHARS
    assert scope != scope_of(Reads(), RunContext(user_id=HUGE + "t", tenant_id=HUGE))


async def test_tenants_with_huge_ids_keep_their_breakers_apart_and_short():
    class Flaky:
        name = "flaky"
        context_fields = ("user_id",)

        async def fetch(self, query, ctx):
            raise ConnectionError("down for " + ctx.user_id[:3])

    board = Breakers(BreakerSettings(threshold=1), clock=Clock())
    source = Flaky()
    await resolve_context([source], "q", RunContext(user_id=HUGE), breaker=board)
    other = await resolve_context([source], "q", RunContext(user_id=HUGE + "2"), breaker=board)
    assert other.outcomes[0].status is Status.FAILED, "another user's circuit stays closed"
    again = await resolve_context([source], "q", RunContext(user_id=HUGE), breaker=board)
    assert again.outcomes[0].status is Status.SKIPPED, "the first user's circuit is open"
    keys = [k for b in board.breakers() if b._callers for k in b._callers._where]
    assert keys and all(len(repr(k)) < 4 * MAX_SCOPE_CHARS for k in keys)


class Private:
    """One tenant's private notes; states its identity and the fields it reads."""

    name = "private"
    source_identity = "notes:private"
    context_fields = ("tenant_id", "user_id")

    def __init__(self) -> None:
        self.calls = 0

    async def fetch(self, query, ctx):
        self.calls += 1
        return f"notes of {ctx.tenant_id[-1]}/{ctx.user_id[-1]}"


async def test_long_ids_that_differ_late_share_no_redis_entry(redis_server, namespace):  # noqa: F811
    # Two workers on one Redis; two tenants whose ids differ past the scope text's
    # length: each reads its own entry, never the other's.
    from lionctx.cache import RedisCache
    from lionctx.providers import CachedContextProvider

    prefix = "t" * (4 * MAX_SCOPE_CHARS)
    tenants = {"a": RunContext(tenant_id=prefix + "a", user_id=prefix + "1"),
               "b": RunContext(tenant_id=prefix + "b", user_id=prefix + "1")}
    workers = [CachedContextProvider(Private(), ttl=60,
                                     cache=RedisCache(redis_server.url, namespace=namespace))
               for _ in range(2)]
    for worker in workers:
        for tenant, ctx in tenants.items():
            res = await resolve_context([worker], "q", ctx, breaker=False)
            assert res.outcomes[0].text.endswith(f"notes of {tenant}/1\n</context>")
    assert workers[0].inner.calls == 2 and workers[1].inner.calls == 0, "shared per tenant"

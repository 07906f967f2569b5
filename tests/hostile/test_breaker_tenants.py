"""One user attacks a shared source's circuit breaker: their failing requests must not
switch the source off for anyone else.

The attack: a provider whose answer depends on the user (their row, their token)
fails for one user only. A breaker per provider object, process-wide, opened after
three of that user's requests and kept every other user from being served. A
failure is now counted in its domain: per user (and tenant) when the provider
declares it reads them or says the failure is the user's, for the whole source only
when it belongs to the source (or ``threshold`` different callers fail in a row).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import (
    Breakers,
    BreakerSettings,
    ContextProviderRegistry,
    Outcome,
    Status,
    bind_run_context,
    resolve_context,
)
from lionctx._outcome import SourceUnavailable
from lionctx.providers import HttpContextProvider

from tests.fakes import Clock

pytestmark = pytest.mark.anyio




class PerUserRows:
    """A source of per-user rows that declares it reads the user: the row of a user
    who has none is missing (the provider raises)."""

    name = "profile"
    context_fields = ("user_id",)

    def __init__(self, rows: dict[str, str]) -> None:
        self.rows = rows
        self.calls: list[str] = []

    async def fetch(self, query, ctx):
        user = ctx.user_id
        self.calls.append(user)
        if user not in self.rows:
            raise LookupError("no profile row for this user")
        return self.rows[user]

    async def provide(self, branch, instruction):
        from lionctx import bound_run_context

        return await self.fetch(instruction, bound_run_context())


class SaysItIsTheUsers:
    """Declares nothing; says its failure is the user's (a revoked token)."""

    name = "tokens"

    def __init__(self) -> None:
        self.calls = 0

    async def fetch(self, query, ctx):
        self.calls += 1
        if ctx.user_id == "mallory":
            raise SourceUnavailable("token revoked", scope="user")
        return f"token ok for {ctx.user_id}"


def _served(res) -> bool:
    return res.outcomes[0].status is Status.FIRED


async def test_one_users_failures_do_not_stop_another_user_on_the_process_board():
    # The default board (process-wide, per provider object), as a service uses it.
    source = PerUserRows({"alice": "alice likes tea"})
    served = 0
    for _burst in range(4):  # 12 failing requests, three in a row at a time
        for _ in range(3):
            res = await resolve_context([source], "q", {"user_id": "mallory"})
            assert res.outcomes[0].status in (Status.FAILED, Status.SKIPPED)
        for _ in range(15):
            served += _served(await resolve_context([source], "q", {"user_id": "alice"}))
    assert served == 60, "every one of alice's turns is served"
    # Mallory's own circuit opened after three: she stopped costing the source.
    assert source.calls.count("mallory") == 3
    row = (await resolve_context([source], "q", {"user_id": "mallory"})).outcomes[0]
    assert row.status is Status.SKIPPED and row.circuit == "open"
    assert row.reason.startswith("circuit for this caller (user_id) open until ")
    assert "mallory" not in row.reason, "the reason names fields, not values"


async def test_a_failure_marked_as_the_users_is_counted_for_that_user_only():
    board = Breakers(clock=Clock())
    source = SaysItIsTheUsers()
    for _ in range(10):
        mal = await resolve_context([source], "q", {"user_id": "mallory"}, breaker=board)
        ok = await resolve_context([source], "q", {"user_id": "alice"}, breaker=board)
        assert _served(ok)
    assert mal.outcomes[0].status is Status.SKIPPED
    assert source.calls == 3 + 10, "mallory's three, then alice's ten"
    # Another tenant's mallory is another caller.
    other = await resolve_context([source], "q", {"user_id": "mallory", "tenant_id": "t2"},
                                  breaker=board)
    assert other.outcomes[0].status is Status.FAILED and other.outcomes[0].blame == "user"


async def test_per_tenant_counting_where_the_provider_reads_only_the_tenant():
    class TenantIndex:
        name = "index"
        context_fields = ("tenant_id",)

        async def fetch(self, query, ctx):
            if ctx.tenant_id == "acme":
                raise RuntimeError("acme's index is being rebuilt")
            return f"index of {ctx.tenant_id}"

    board = Breakers(clock=Clock())
    source = TenantIndex()
    for user in ("u1", "u2", "u3"):
        await resolve_context([source], "q", {"user_id": user, "tenant_id": "acme"},
                              breaker=board)
    # Counted per tenant: acme is open for every acme user, globex is served.
    acme = await resolve_context([source], "q", {"user_id": "u4", "tenant_id": "acme"},
                                 breaker=board)
    assert acme.outcomes[0].status is Status.SKIPPED
    assert "circuit for this caller (tenant_id)" in acme.outcomes[0].reason
    for user in ("u1", "u5"):
        res = await resolve_context([source], "q", {"user_id": user, "tenant_id": "globex"},
                                    breaker=board)
        assert res.text.endswith("index of globex\n</context>")


async def test_a_query_failing_for_every_user_still_opens_the_source_for_everyone():
    board = Breakers(BreakerSettings(threshold=3), clock=Clock())
    source = PerUserRows({})  # nobody's row: the query itself is broken
    for user in ("u1", "u2", "u3"):
        res = await resolve_context([source], "q", {"user_id": user}, breaker=board)
        assert res.outcomes[0].status is Status.FAILED
    res = await resolve_context([source], "q", {"user_id": "u4"}, breaker=board)
    assert res.outcomes[0].status is Status.SKIPPED, "three different users: the source's"
    assert res.outcomes[0].reason.startswith("circuit open until ")
    assert source.calls == ["u1", "u2", "u3"]


async def test_one_user_failing_many_times_never_opens_the_source():
    board = Breakers(BreakerSettings(threshold=2), clock=Clock())
    source = PerUserRows({"alice": "a"})
    for _ in range(20):
        await resolve_context([source], "q", {"user_id": "mallory"}, breaker=board)
    assert board.get(source).state == "closed" and board.get(source).failures == 1


async def test_the_registry_face_counts_per_bound_user():
    reg = ContextProviderRegistry(breaker=Breakers(clock=Clock()))
    source = PerUserRows({"alice": "alice likes tea"})
    reg.register(source)
    for _ in range(6):
        with bind_run_context(user_id="mallory"):
            await reg.gather(None, "q")
        with bind_run_context(user_id="alice"):
            report = await reg.gather(None, "q")
        assert report.blocks == ["alice likes tea"]
    assert source.calls.count("mallory") == 3


# --- HTTP: a refused token on a per-user request is the user's ----------------------
class _Tokens(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002
        pass

    def do_GET(self):  # noqa: N802
        token = self.headers.get("Authorization", "")
        if self.path == "/down":
            status, body = 503, b"down"
        elif token == "Bearer revoked-token":
            status, body = 401, b"no"
        else:
            status, body = 200, b"notes for " + token.encode()[-5:]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def notes_api() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Tokens)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


class NotesApi(HttpContextProvider):
    """One source, built per request with the caller's token: it states the identity
    of the endpoint (without the token), so every request's provider shares one
    breaker, as built-in providers that state an identity do."""

    source_identity = "http GET notes-api"


async def test_http_401_on_a_per_user_request_is_the_users_and_a_503_is_the_sources(
        notes_api):
    board = Breakers(clock=Clock())

    async def turn(user: str, token: str, path: str = "/notes"):
        async with NotesApi(notes_api + path, name="notes",
                            headers={"Authorization": f"Bearer {token}"}) as p:
            return (await resolve_context([p], "q", {"user_id": user}, breaker=board)
                    ).outcomes[0]

    for _ in range(6):
        bad = await turn("mallory", "revoked-token")
        good = await turn("alice", "alices-token")
        assert good.status is Status.FIRED, "alice is served on every turn"
    assert bad.status is Status.SKIPPED and bad.circuit == "open"
    first = await turn("mallory", "revoked-token")
    assert first.status is Status.SKIPPED
    # A 5xx is the source's: counted for everyone.
    down = [await turn(u, f"{u}-token", "/down") for u in ("a", "b", "c")]
    assert [o.blame for o in down] == [None, None, None]
    assert (await turn("alice", "alices-token")).status is Status.SKIPPED


async def test_http_401_row_says_whose_failure(notes_api):
    async with HttpContextProvider(notes_api + "/notes", name="n",
                                   headers={"Authorization": "Bearer revoked-token"}) as p:
        res = await resolve_context([p], "q", breaker=False)
    row = res.outcomes[0]
    assert row.status is Status.FAILED and row.blame == "user" and "HTTP 401" in row.reason


def test_a_scope_that_is_not_known_is_refused_by_name():
    with pytest.raises(ValueError, match="'everyone'"):
        SourceUnavailable("x", scope="everyone")


# --- the property ----------------------------------------------------------------------
class Declares:
    name = "declares"

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.context_fields = fields


_CTX = st.fixed_dictionaries({"user_id": st.sampled_from(["u1", "u2", None]),
                              "tenant_id": st.sampled_from(["t1", "t2", None])})
_FAILURE = st.tuples(st.sampled_from([Status.FAILED, Status.TIMEOUT]),
                     st.sampled_from([None, "user"]))


@settings(max_examples=300, deadline=None)
@given(fields=st.sampled_from([(), ("user_id",), ("tenant_id",), ("user_id", "tenant_id"),
                               ("tenant_id", "user_id")]),
       a=_CTX, b=_CTX, failures=st.lists(_FAILURE, min_size=1, max_size=12),
       threshold=st.integers(1, 3))
def test_breaker_state_written_under_one_caller_is_not_read_under_another(
        fields, a, b, failures, threshold):
    """Any failures written under run context ``a``; then a call under ``b``, which
    differs from ``a`` in user or tenant. ``b`` is refused only when the provider
    declares it reads none of the fields ``a`` and ``b`` differ in, and the failures
    were its source's (not marked as the user's)."""
    differ = {f for f in ("user_id", "tenant_id") if a[f] != b[f]}
    if not differ:
        return
    clock = Clock()
    board = Breakers(BreakerSettings(threshold=threshold), clock=clock)
    provider = Declares(fields)
    for status, blame in failures:
        breakers, allowed, refused, _ = board.admit([provider], lambda: a)
        if not allowed:
            clock.now += 0.001  # still open for a; nothing is written
            continue
        board.record(breakers, [Outcome("declares", 0, status, reason="x", blame=blame)],
                     lambda: a)
    _, allowed, _, _ = board.admit([provider], lambda: b)
    if differ & set(fields) or all(blame == "user" for _, blame in failures):
        assert allowed == [0], "b read breaker state written under a"


def test_a_source_that_reads_no_caller_field_is_one_source_for_everyone():
    # The property's exception, shown: nothing declared, plain failures are the source's.
    board = Breakers(clock=Clock())
    provider = Declares(())
    a, b = {"user_id": "u1"}, {"user_id": "u2"}
    for _ in range(3):
        breakers, *_ = board.admit([provider], lambda: a)
        board.record(breakers, [Outcome("declares", 0, Status.FAILED, reason="x")], lambda: a)
    assert board.admit([provider], lambda: b)[1] == []


async def test_a_hostile_scope_on_a_failure_costs_nothing_but_its_row():
    class Odd(SourceUnavailable):
        @property
        def scope(self):  # a property that raises, where the scope belongs
            raise RuntimeError("no scope for you")

        @scope.setter
        def scope(self, value):
            pass

    class Weird:
        name = "weird"

        async def fetch(self, query, ctx):
            raise Odd("down")

    res = await resolve_context([Weird()], "q", {"user_id": "u"}, breaker=Breakers())
    assert res.outcomes[0].status is Status.FAILED and res.outcomes[0].blame is None

"""A provider's name and what a pass awaits for it, for every shape of provider."""

from __future__ import annotations

from functools import partial

import pytest
from lionctx._adapters import call_fetch, fetch_invoker, provider_name
from lionctx.providers import ContextSource


class AsyncFetch:
    name = "plain"

    async def fetch(self, query, ctx):
        return "x"


class SyncFetch:
    def fetch(self, query, ctx):
        return "x"


class LegacyOnly:
    label = "legacy"

    async def fetchContext(self, query, ctx):  # noqa: N802  (agentium's spelling)
        return "x"


class Source(ContextSource):
    name = "source"

    async def retrieve(self, query, ctx):
        return "x"


class SourceWithOwnFetch(ContextSource):
    async def retrieve(self, query, ctx):
        return "r"

    async def fetch(self, query, ctx):
        return "f"


class ClaimsOnInstance(AsyncFetch):
    def __init__(self):
        self._lionctx_retrieves = True  # an instance cannot claim retrieve

    async def retrieve(self, query, ctx):
        return "never"


class NameSubclass(str):
    pass


class Odd:
    def __init__(self, name):
        self.name = name

    async def fetch(self, query, ctx):
        return "x"


class RaisingName:
    @property
    def name(self):
        raise RuntimeError("no name")

    label = "fallback"

    async def fetch(self, query, ctx):
        return "x"


class NotCallableFetch:
    fetch = "not a method"

    async def fetchContext(self, query, ctx):  # noqa: N802
        return "x"


# provider, its name on the LionAGI face, on the agentium face, the method awaited
# (None: the sync fetch, called through call_fetch in a worker thread).
CASES = [
    (AsyncFetch(), "plain", "plain", "fetch"),
    (SyncFetch(), "SyncFetch", "SyncFetch", None),
    (LegacyOnly(), "LegacyOnly", "legacy", "fetchContext"),
    (Source(), "source", "source", "retrieve"),
    (SourceWithOwnFetch(), "SourceWithOwnFetch", "SourceWithOwnFetch", "fetch"),
    (ClaimsOnInstance(), "plain", "plain", "fetch"),
    (Odd("caf\u00e9"), "caf\u00e9", "caf\u00e9", "fetch"),
    (Odd("bad \udcff name"), "bad \ufffd name", "bad \ufffd name", "fetch"),
    (Odd(""), "Odd", "Odd", "fetch"),
    (Odd(NameSubclass("sub")), "sub", "sub", "fetch"),
    (Odd(None), "Odd", "Odd", "fetch"),
    (Odd(3), "Odd", "Odd", "fetch"),
    (RaisingName(), "RaisingName", "fallback", "fetch"),
    (NotCallableFetch(), "NotCallableFetch", "NotCallableFetch", "fetchContext"),
]


@pytest.mark.parametrize(("provider", "lionagi", "agentium", "awaited"), CASES,
                         ids=lambda v: type(v).__name__)
def test_name_and_invoker(provider, lionagi, agentium, awaited):
    assert provider_name(provider) == lionagi
    assert provider_name(provider, agentium=True) == agentium
    assert provider_name(provider, "given") == "given"
    invoke = fetch_invoker(provider)
    if awaited is None:
        assert isinstance(invoke, partial)
        assert invoke.func is call_fetch and invoke.args == (provider,)
    else:
        assert invoke == getattr(provider, awaited)


def test_a_name_is_a_plain_str():
    # A str subclass (which may override __str__ or __format__) is not passed on.
    assert type(provider_name(Odd(NameSubclass("sub")))) is str


def test_an_instance_cannot_claim_retrieve():
    p = ClaimsOnInstance()
    assert fetch_invoker(p) == p.fetch
    s = Source()
    assert fetch_invoker(s) == s.retrieve

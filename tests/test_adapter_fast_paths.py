"""The adapters' fast paths decide as the plain rules do: a provider's
name and what a pass awaits for it, for every shape of provider."""

from __future__ import annotations

from functools import partial

import pytest
from lionctx._adapters import (
    call_fetch,
    fetch_invoker,
    fetch_method,
    provider_name,
    retrieve_method,
)
from lionctx.providers import ContextSource


def plain_name(provider, explicit=None, *, agentium=False):
    from lionctx._text import make_encodable

    if explicit:
        return make_encodable(explicit)[0]
    for attr in (("name", "label") if agentium else ("name",)):
        try:
            value = getattr(provider, attr, None)
        except Exception:
            value = None
        if value and isinstance(value, str):
            return make_encodable(value)[0]
    return type(provider).__name__


def plain_invoker(provider):
    import inspect

    method = retrieve_method(provider) or fetch_method(provider)
    if method is not None and inspect.iscoroutinefunction(method):
        return method
    return partial(call_fetch, provider)


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


def _same(a, b):
    if isinstance(a, partial) or isinstance(b, partial):
        return (isinstance(a, partial) and isinstance(b, partial) and a.func is b.func
                and a.args == b.args)
    return a == b  # bound methods compare by function and instance


PROVIDERS = [AsyncFetch(), SyncFetch(), LegacyOnly(), Source(), SourceWithOwnFetch(),
             ClaimsOnInstance(), Odd("caf\u00e9"), Odd("bad \udcff name"), Odd(""),
             Odd(NameSubclass("sub")), Odd(None), Odd(3), RaisingName(), NotCallableFetch()]


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: type(p).__name__)
def test_the_fast_paths_decide_as_the_plain_rules(provider):
    for agentium in (False, True):
        assert provider_name(provider, agentium=agentium) == plain_name(
            provider, agentium=agentium)
        assert type(provider_name(provider, agentium=agentium)) is type(
            plain_name(provider, agentium=agentium))
    assert _same(fetch_invoker(provider), plain_invoker(provider))


def test_an_instance_cannot_claim_retrieve():
    p = ClaimsOnInstance()
    assert fetch_invoker(p) == p.fetch
    s = Source()
    assert fetch_invoker(s) == s.retrieve

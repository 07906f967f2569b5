"""agentium_compat's providers: agentium's option names and units, the same behaviour."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lionctx
import pytest
from agentium_compat import (
    CachedContextProvider,
    DatabaseContextProvider,
    FilesystemContextProvider,
    HttpContextProvider,
    RunContext,
    SourceUnavailable,
    resolve_context,
    resolveContextProviders,
)
from lionctx import ContextProviderRegistry, Status

from tests.providers.http_server import LoopbackServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def srv() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    (tmp_path / "guide.md").write_text("Be kind.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "faq.md").write_text("Q: why? A: because.")
    (tmp_path / "big.md").write_text("x" * 2000)
    return tmp_path


async def test_the_pages_example_end_to_end(notes: Path, srv: LoopbackServer) -> None:
    srv.ok_body = "all systems normal"
    fs = FilesystemContextProvider(basePath=str(notes), glob="**/*.md", encoding="utf8",
                                   maxFileSize=1024, maxFiles=20)
    status = HttpContextProvider(url=srv.url("/ok"), method="GET",
                                 headers={"Authorization": "Bearer t0ken-abc"},
                                 timeoutMs=5_000, cacheTtlMs=60_000,
                                 allowedHosts=["127.0.0.1"])

    async def load_profile(ctx: Any) -> str | None:
        return f"name: {ctx.userId}\nplan: pro" if ctx.userId else None

    profile = DatabaseContextProvider(name="user-profile", fetch=load_profile)
    fs.name = "notes"
    status.name = "status-feed"
    text = await resolveContextProviders([fs, status, profile], "hello", {"userId": "ada"})
    assert text == (
        '<context name="notes">\n# guide.md\nBe kind.\n\n# sub/faq.md\nQ: why? A: because.\n'
        '</context>\n\n'
        '<context name="status-feed">\nall systems normal\n</context>\n\n'
        '<context name="user-profile">\nname: ada\nplan: pro\n</context>'
    )
    assert fs.lastSkipped == [("big.md", "2000 bytes, over max_file_size 1024")]
    await resolveContextProviders([status], "again", RunContext(user_id="ada"))
    assert srv.count("/ok") == 1  # cacheTtlMs kept the first answer
    await status.aclose()


def test_they_are_the_lionctx_classes(notes: Path) -> None:
    fs = FilesystemContextProvider({"basePath": str(notes), "maxFiles": 3})
    assert isinstance(fs, lionctx.FilesystemContextProvider)
    assert fs.maxFiles == 3 and fs.maxFileSize == 100 * 1024
    assert fs.basePath == str(notes) and fs.encoding == "utf-8"
    http = HttpContextProvider({"url": "http://127.0.0.1:9/x", "timeoutMs": 1500,
                                "cacheTtlMs": 250})
    assert isinstance(http, lionctx.HttpContextProvider)
    assert http.timeout == 1.5 and http.timeoutMs == 1500 and http.cacheTtlMs == 250
    assert HttpContextProvider(url="http://127.0.0.1:9/").timeout == 5.0  # the page's default
    db = DatabaseContextProvider({"name": "p", "fetch": lambda ctx: "x"})
    assert isinstance(db, lionctx.DatabaseContextProvider)
    cached = CachedContextProvider(db, 30_000)
    assert isinstance(cached, lionctx.CachedContextProvider)
    assert cached.ttl == 30.0 and cached.ttlMs == 30_000 and cached.name == "p"


async def test_published_form_label_and_query_ctx() -> None:
    async def fetch_context(query: str, ctx: Any) -> str:
        return f"{ctx.userId} asked {query}"

    p = DatabaseContextProvider(label="legacy", fetch=fetch_context)
    assert await resolveContextProviders([p], "why", {"userId": "u"}) == (
        '<context name="legacy">\nu asked why\n</context>')


async def test_every_provider_serves_the_lionagi_face(notes: Path, srv: LoopbackServer) -> None:
    http = HttpContextProvider(url=srv.url("/echo"), method="POST", body={"q": 1})
    providers = [
        FilesystemContextProvider(basePath=str(notes), glob="guide.md", name="fs"),
        http,
        DatabaseContextProvider(name="db", fetch=lambda ctx: f"user {ctx.userId}"),
        CachedContextProvider(DatabaseContextProvider(name="c", fetch=lambda q, ctx: q),
                              1000),
    ]
    reg = ContextProviderRegistry()
    for p in providers:
        reg.register(p)
    report = await reg.gather(SimpleNamespace(run_context=RunContext(user_id="u7")), "hi")
    # agentium's spelling gets lionctx's default name: host:port/path
    assert report.names == ["fs", f"{srv.host}/echo", "db", "c"]
    assert report.blocks[0] == "# guide.md\nBe kind."
    assert json.loads(report.blocks[1])["body"] == '{"q": 1}'
    assert report.blocks[2:] == ["user u7", "hi"]
    await http.aclose()


async def test_disallowed_redirect_never_reaches_the_other_host(srv: LoopbackServer) -> None:
    with LoopbackServer() as other:
        p = HttpContextProvider(url=srv.url(f"/redirect?to={other.url('/ok')}"),
                                allowedHosts=[srv.host])
        assert await resolveContextProviders([p], "q", {}) == ""
        assert p.lastError is not None
        assert p.lastError.startswith("refused:")
        res = await resolve_context([p], "q", {})
        assert res.outcomes[0].status is Status.FAILED
        assert res.outcomes[0].error == p.lastError
        assert other.count() == 0
        await p.aclose()


async def test_a_failing_endpoint_is_null_from_fetch_and_failed_in_reports(
        srv: LoopbackServer) -> None:
    # The page: "returns null and silently continues". The reports say why.
    status = HttpContextProvider(url=srv.url("/status/500?apiKey=k-123456"),
                                 name="status-feed")
    assert await status.fetch("q", {}) is None
    reason = f"HTTP 500 from http://127.0.0.1:{srv.port}/status/500"
    assert status.lastError == reason

    async def profile(ctx: Any) -> str:
        return "plan: pro"

    providers = [status, DatabaseContextProvider(name="profile", fetch=profile)]
    text = await resolveContextProviders(providers, "q", {"userId": "u"})
    assert text == '<context name="profile">\nplan: pro\n</context>'  # the same string
    res = await resolve_context(providers, "q", {"userId": "u"})
    assert res.text == text
    assert [(o.name, o.status, o.error) for o in res.outcomes] == [
        ("status-feed", Status.FAILED, reason), ("profile", Status.FIRED, None)]
    assert "k-123456" not in json.dumps(res.to_dict())
    reg = ContextProviderRegistry()
    for p in providers:
        reg.register(p)
    report = await reg.gather(SimpleNamespace(run_context=RunContext(user_id="u")), "q")
    assert report.failed == ["status-feed"] and report.blocks == ["plan: pro"]
    assert report.outcomes[0].error == reason
    await status.aclose()


async def test_last_error_on_every_wrapper(tmp_path: Path) -> None:
    fs = FilesystemContextProvider(basePath=str(tmp_path / "missing"))
    assert await fs.fetch("q", {}) is None and fs.lastError is not None
    assert "is not a directory" in fs.lastError

    async def down(ctx: Any) -> str:
        raise SourceUnavailable("profile service unreachable")

    db = DatabaseContextProvider(name="profile", fetch=down)
    cached = CachedContextProvider(db, 1000)
    assert await cached.fetch("q", {}) is None
    assert cached.lastError == db.lastError == "profile service unreachable"
    res = await resolve_context([cached], "q", {})
    assert res.outcomes[0].status is Status.FAILED
    assert res.outcomes[0].error == "profile service unreachable"


@pytest.mark.parametrize("cls, kw, exc, word", [
    (FilesystemContextProvider, {"basePath": ".", "maxFileSize": -1}, ValueError, "maxFileSize"),
    (FilesystemContextProvider, {"basePath": ".", "maxFiles": 0}, ValueError, "maxFiles"),
    (FilesystemContextProvider, {"basePath": ".", "glob": "../*.md"}, ValueError, "glob"),
    (FilesystemContextProvider, {"basePath": None}, TypeError, "basePath"),
    (FilesystemContextProvider, {}, TypeError, "basePath"),
    (FilesystemContextProvider, {"basePath": ".", "max_files": 3}, TypeError, "maxFiles"),
    (HttpContextProvider, {"url": "ftp://x/"}, ValueError, "url"),
    (HttpContextProvider, {"url": "http://a/", "timeoutMs": 0}, ValueError, "timeoutMs"),
    (HttpContextProvider, {"url": "http://a/", "cacheTtlMs": -1}, ValueError, "cacheTtlMs"),
    (HttpContextProvider, {"url": "http://a/", "allowedHosts": ["b"]}, ValueError,
     "allowedHosts"),
    (HttpContextProvider, {"url": "http://a/", "maxResponseBytes": -1}, ValueError,
     "maxResponseBytes"),
    (HttpContextProvider, {"url": "http://a/", "timeout_ms": 5}, TypeError, "timeout_ms"),
    (DatabaseContextProvider, {"name": "x"}, TypeError, "fetch"),
])
def test_bad_options_are_refused_in_agentium_spelling(cls: Any, kw: dict[str, Any],
                                                      exc: type, word: str) -> None:
    with pytest.raises(exc, match=word):
        cls(**kw)


def test_cached_bad_ttl_named_ttl_ms() -> None:
    inner = DatabaseContextProvider(name="x", fetch=lambda ctx: "x")
    with pytest.raises(ValueError, match="ttlMs"):
        CachedContextProvider(inner, 0)
    with pytest.raises(ValueError, match="maxSize"):
        CachedContextProvider(inner, 10, maxSize=0)


def test_options_given_twice_are_refused(notes: Path) -> None:
    with pytest.raises(TypeError, match="twice"):
        FilesystemContextProvider({"basePath": str(notes)}, basePath=str(notes))


def test_errors_rename_options_but_never_the_bad_value(notes: Path) -> None:
    # The message names the option in agentium's spelling and quotes the value as given.
    with pytest.raises(ValueError) as info:
        FilesystemContextProvider(basePath=str(notes), glob="../max_files/*.md")
    assert "'../max_files/*.md'" in str(info.value) and "glob" in str(info.value)
    with pytest.raises(ValueError) as info2:
        HttpContextProvider(url="http://a/", allowedHosts=["cache_ttl:99999999"])
    assert "'cache_ttl:99999999'" in str(info2.value) and "allowedHosts" in str(info2.value)


def test_agentium_defaults(notes: Path) -> None:
    fs = FilesystemContextProvider(basePath=str(notes))
    assert (fs.glob, fs.encoding, fs.maxFileSize, fs.maxFiles) == ("**/*.md", "utf-8",
                                                                   100 * 1024, 20)
    http = HttpContextProvider(url="http://127.0.0.1:9/")
    assert (http.method, http.timeoutMs, http.cacheTtlMs) == ("GET", 5000, 0)


def test_cached_provider_takes_the_identity_in_agentium_spelling() -> None:
    from agentium_compat import CachedContextProvider, DatabaseContextProvider

    inner = DatabaseContextProvider(name="profile", fetch=lambda ctx: f"user {ctx.userId}")
    cached = CachedContextProvider(inner, 30_000, sourceIdentity="crm:profiles",
                                   contextFields=("user_id",))
    assert cached.source_identity == "crm:profiles"
    assert cached.context_fields == ("user_id",)
    with pytest.raises(lionctx.LionctxError, match="contextFields|context_fields"):
        CachedContextProvider(inner, 30_000, contextFields="user_id")

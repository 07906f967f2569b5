"""Worker processes for the cross-process cache tests (spawned, so importable)."""

from __future__ import annotations

import os
from typing import Any

import anyio
from lionctx._context import context_value
from lionctx.cache import RedisCache
from lionctx.providers import CachedContextProvider, ContextSource, HttpContextProvider


def http_worker(redis_url: str, namespace: str, url: str, calls: int, ready: Any, go: Any,
                out: Any, lease: float = 5.0, timeout: float = 10.0) -> None:
    """``calls`` concurrent cold calls of one HTTP source; puts (pid, results) on ``out``."""

    async def main() -> list[tuple[str | None, bool, str | None]]:
        cache = RedisCache(redis_url, namespace=namespace, lease=lease)
        provider = HttpContextProvider(url, cache_ttl=60, timeout=timeout, cache=cache)
        results: list[tuple[str | None, bool, str | None]] = []

        async def one() -> None:
            try:
                text = await provider.retrieve("", None)
            except Exception as exc:  # reported, so the test can say what went wrong
                results.append((f"error: {type(exc).__name__}: {exc}", False, None))
                return
            results.append((None if text is None else str.__add__("", text),
                            bool(getattr(text, "cached", False)), provider.degradation_reason))

        ready.set()
        await anyio.to_thread.run_sync(go.wait)
        async with anyio.create_task_group() as tg:
            for _ in range(calls):
                tg.start_soon(one)
        await provider.aclose()
        await cache.aclose()
        return results

    out.put((os.getpid(), anyio.run(main)))


class Profiles(ContextSource):
    """A per-user source: the text names the tenant, user and query it was made for."""

    name = "profile"
    source_identity = "tests:profiles"
    context_fields = ("tenant_id", "user_id")

    def __init__(self) -> None:
        self.calls = 0

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        self.calls += 1
        await anyio.sleep(0.01)
        tenant = context_value(ctx, "tenant_id")
        user = context_value(ctx, "user_id")
        return f"profile tenant={tenant} user={user} query={query}"


def users_worker(redis_url: str, namespace: str, requests: list[tuple[str, str, str]],
                 go: Any, out: Any) -> None:
    """Each (tenant, user, query) once, all concurrently; puts what each one got."""
    from lionctx import RunContext

    async def main() -> tuple[int, list[tuple[tuple[str, str, str], str | None]], list[str]]:
        # What is shown is the keys and the lease: no Redis command late past op_timeout,
        # no lease lapsed, no wait given up on a busy machine may hand a request to this
        # process's own cache instead, so every bound is far past any pause (hang guards).
        cache = RedisCache(redis_url, namespace=namespace, op_timeout=30, lease=60, wait=60)
        inner = Profiles()
        provider = CachedContextProvider(inner, 60, cache=cache)
        got: list[tuple[tuple[str, str, str], str | None]] = []
        reasons: set[str] = set()

        async def one(req: tuple[str, str, str]) -> None:
            tenant, user, query = req
            ctx = RunContext(tenant_id=tenant, user_id=user, session_id="s")
            text = await provider.retrieve(query, ctx)
            if provider.degradation_reason:
                reasons.add(provider.degradation_reason)
            got.append((req, text))

        await anyio.to_thread.run_sync(go.wait)
        async with anyio.create_task_group() as tg:
            for req in requests:
                tg.start_soon(one, req)
        await cache.aclose()
        return inner.calls, [(r, None if t is None else str.__add__("", t)) for r, t in got], \
            sorted(reasons)

    out.put((os.getpid(), anyio.run(main)))

"""The single-flight TTL cache (``providers/_flight.py``) against a plain reference model.

Any sequence of loads (values, ``None``, failures), clock moves and invalidations
gives what a dict of (value, stored-at) and a dict of last good values say it should;
any number of concurrent cold calls for one key makes one load.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx.providers import FlightCache, SharedFetchError
from lionctx.providers import FlightCache as FromCacheModule
from lionctx.providers._flight import Hit, Source, lead_flight

TTL = 10.0

steps = st.lists(st.one_of(
    st.tuples(st.just("get"), st.sampled_from("ab"),
              st.one_of(st.text(min_size=1, max_size=3), st.none(), st.just(RuntimeError))),
    st.tuples(st.just("wait"), st.floats(0, 15, allow_nan=False), st.none()),
    st.tuples(st.just("invalidate"), st.sampled_from("ab"), st.none()),
), max_size=30)


@settings(max_examples=150, deadline=None)
@given(steps, st.booleans())
def test_the_cache_answers_as_the_reference_model(
        script: list[tuple[str, Any, Any]], stale_on_error: bool) -> None:
    now = [0.0]
    cache: FlightCache[str] = FlightCache(TTL, stale_on_error=stale_on_error,
                                          timer=lambda: now[0])
    fresh: dict[str, tuple[str, float]] = {}  # key -> (value, stored at)
    last_good: dict[str, str] = {}

    async def run() -> None:
        for action, arg, answer in script:
            if action == "wait":
                now[0] += arg
                continue
            if action == "invalidate":
                cache.invalidate(arg)
                fresh.pop(arg, None)
                last_good.pop(arg, None)
                continue
            loads: list[int] = []

            async def load(answer: Any = answer, loads: list[int] = loads) -> str | None:
                loads.append(1)
                if answer is RuntimeError:
                    raise RuntimeError("down")
                return answer  # type: ignore[no-any-return]

            stored = fresh.get(arg)
            if stored is not None and now[0] < stored[1] + TTL:  # as TTLCache compares
                hit = await cache.get(arg, load)
                assert (hit.value, hit.source, loads) == (stored[0], Source.CACHED, [])
                continue
            fresh.pop(arg, None)
            if answer is RuntimeError:
                if stale_on_error and arg in last_good:
                    hit = await cache.get(arg, load)
                    assert (hit.value, hit.source) == (last_good[arg], Source.STALE)
                    assert isinstance(hit.error, RuntimeError)
                else:
                    with pytest.raises(RuntimeError):
                        await cache.get(arg, load)
                assert loads == [1]
                continue
            hit = await cache.get(arg, load)
            assert (hit.value, hit.source, loads) == (answer, Source.FRESH, [1])
            if answer is None:
                last_good.pop(arg, None)  # the source said "nothing"
            else:
                fresh[arg] = (answer, now[0])
                last_good[arg] = answer
            assert len(cache) == sum(1 for _, at in fresh.values() if now[0] < at + TTL)

    anyio.run(run)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 60), st.sampled_from(["value", "none", "failure"]))
def test_concurrent_cold_calls_make_one_load_and_share_its_outcome(
        callers: int, outcome: str) -> None:
    cache: FlightCache[str] = FlightCache(TTL)
    loads: list[int] = []
    results: list[Any] = []

    async def load() -> str | None:
        loads.append(1)
        await anyio.sleep(0.01)
        if outcome == "failure":
            raise RuntimeError("down")
        return "v" if outcome == "value" else None

    async def call() -> None:
        try:
            results.append(await cache.get("k", load))
        except (RuntimeError, SharedFetchError) as exc:
            results.append(exc)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(callers):
                tg.start_soon(call)

    anyio.run(run)
    assert loads == [1]
    assert len(results) == callers
    if outcome == "failure":
        assert sum(isinstance(r, SharedFetchError) for r in results) == callers - 1
        assert sum(type(r) is RuntimeError for r in results) == 1
    else:
        expected = "v" if outcome == "value" else None
        assert [r.value for r in results] == [expected] * callers
        assert sorted(r.source.value for r in results) == sorted(
            ["fresh"] + ["shared"] * (callers - 1))


@pytest.mark.anyio
async def test_an_abandoned_leader_hands_the_load_to_a_waiter() -> None:
    flights: dict[Any, Any] = {}
    started = anyio.Event()

    async def slow() -> Hit[Any]:
        started.set()
        await anyio.sleep(10)
        raise AssertionError("not reached")

    async with anyio.create_task_group() as tg:
        async def leader() -> None:
            with anyio.CancelScope() as scope:
                tg.start_soon(cancel_after_start, scope)
                await lead_flight(flights, "k", slow)

        async def cancel_after_start(scope: anyio.CancelScope) -> None:
            await started.wait()
            flight = flights["k"]
            scope.cancel()
            await flight.done.wait()
            assert flight.abandoned and flight.error is None
            assert "k" not in flights  # a waiter finds no flight and leads

        tg.start_soon(leader)


def test_the_old_import_path_is_the_same_class() -> None:
    assert FromCacheModule is FlightCache

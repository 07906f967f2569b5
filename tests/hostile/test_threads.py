"""Blocking provider work must not hold the turn past its timeout or deadline.

A sync ``DatabaseContextProvider`` fetch, a SQLite query and a filesystem walk run
in lionctx worker threads: a timeout abandons the thread, the turn goes on at once,
the late result is dropped, and a source that keeps hanging fails fast
(``WorkersExhausted``) instead of starving every other source of threads.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from lionctx import ContextProviderRegistry, RunContext, Status, _threads
from lionctx import resolve_context as _resolve_context
from lionctx.providers import (
    CachedContextProvider,
    DatabaseContextProvider,
    FilesystemContextProvider,
)

# These attacks call one hung source turn after turn to exhaust threads; the circuit
# breaker (on by default) would rightly stop calling it after three timeouts and hide
# what is under test here (tests/test_breaker.py covers the breaker).
resolve_context = partial(_resolve_context, breaker=False)

pytestmark = pytest.mark.anyio

@pytest.fixture
def anyio_backend(both_backends):
    # concurrency, time and containment hold on asyncio and on trio alike
    return both_backends


BRANCH = SimpleNamespace(run_context=RunContext(user_id="u"))


def slow_sync(release: threading.Event, returned: threading.Event | None = None) -> Any:
    def fetch(ctx: Any) -> str:
        release.wait(30)  # a driver call that hangs (until teardown)
        if returned is not None:
            returned.set()
        return "LATE slow answer"
    return fetch


async def fast(ctx: Any) -> str:
    return "fast answer"


async def run_face(face: str, providers: list[Any], *, timeout: float | None = None,  # noqa: ASYNC109 - passed to the face under test
                   deadline: float | None = None) -> tuple[list[Any], str]:
    """Outcomes and injected text of one turn on one face."""
    if face == "resolve":
        res = await resolve_context(providers, "q", {"userId": "u"}, timeout=timeout,
                                    deadline=deadline)
        return res.outcomes, res.text
    reg = ContextProviderRegistry(concurrent=face == "concurrent", timeout=timeout, breaker=False,
                                  deadline=deadline)
    for p in providers:
        reg.register(p)
    report = await reg.gather(BRANCH, "q")
    return report.outcomes, "".join(report.blocks)


@pytest.mark.parametrize("face", ["sequential", "concurrent", "resolve"])
@pytest.mark.parametrize("bound", ["timeout", "deadline"])
async def test_a_hung_sync_fetch_costs_its_row_not_the_turn(
        face: str, bound: str, release: threading.Event) -> None:
    returned = threading.Event()
    providers = [DatabaseContextProvider("fast", fast),
                 DatabaseContextProvider("slow", slow_sync(release, returned))]
    limit = {"timeout": 0.3} if bound == "timeout" else {"deadline": 0.3}
    outcomes, text = await run_face(face, providers, **limit)
    assert not returned.is_set()  # back while the driver call still hangs
    by_name = {o.name: o for o in outcomes}
    assert by_name["slow"].status is Status.TIMEOUT
    assert by_name["fast"].status is Status.FIRED
    assert "fast answer" in text and "LATE" not in text


@pytest.mark.parametrize("face", ["sequential", "concurrent"])
async def test_under_a_deadline_the_late_provider_is_blamed_not_the_next_one(
        face: str, release: threading.Event) -> None:
    # The slow one first: the broken code reported it fired (its thread could not
    # be cancelled) and timed out the innocent provider after it.
    returned = threading.Event()
    providers = [DatabaseContextProvider("slow", slow_sync(release, returned)),
                 DatabaseContextProvider("fast", fast)]
    outcomes, text = await run_face(face, providers, deadline=0.3)
    assert not returned.is_set()  # back while the driver call still hangs
    slow, quick = outcomes
    assert slow.status is Status.TIMEOUT and "LATE" not in text
    if face == "sequential":
        # Not run at all: the deadline was spent, and the row says so.
        assert quick.status is Status.TIMEOUT and quick.reason.startswith("not started")
    else:
        assert quick.status is Status.FIRED


async def test_the_late_result_is_dropped_and_the_next_turn_is_clean(
        release: threading.Event) -> None:
    calls: list[str] = []

    def fetch(ctx: Any) -> str:
        n = len(calls)
        calls.append("x")
        if n == 0:
            release.wait(3)
            return "LATE"
        return f"answer {n}"

    p = DatabaseContextProvider("db", fetch)
    first = await resolve_context([p], "q", None, timeout=0.2)
    assert first.outcomes[0].status is Status.TIMEOUT and first.text == ""
    release.set()  # the abandoned call returns "LATE" now, to nobody
    await anyio.sleep(0.05)
    second = await resolve_context([p], "q", None, timeout=2)
    assert second.text == '<context name="db">\nanswer 1\n</context>'
    assert p.last_error is None


async def test_forty_stuck_fetches_do_not_starve_other_turns(
        release: threading.Event) -> None:
    entered: list[int] = []

    def stuck(ctx: Any) -> str:
        entered.append(1)
        release.wait(30)  # hung until the test ends
        return "never"

    def healthy(ctx: Any) -> str:
        return "healthy answer"

    stuck_rows: list[Any] = []

    async def stuck_turn() -> None:
        res = await resolve_context([DatabaseContextProvider("stuck", stuck)], "q", None,
                                    timeout=0.15)
        stuck_rows.append(res.outcomes[0])

    async with anyio.create_task_group() as tg:
        # A hung database, and turns that keep coming (more than anyio's 40 threads).
        for _ in range(44):
            tg.start_soon(stuck_turn)
            await anyio.sleep(0.05)
        # Another turn, while those are stuck, with a healthy blocking source.
        res = await resolve_context([DatabaseContextProvider("healthy", healthy)], "q",
                                    None, timeout=1.0)
        release.set()  # so that, on broken code, the stuck turns end and the test fails
    assert res.outcomes[0].status is Status.FIRED, res.outcomes[0].reason
    assert res.text == '<context name="healthy">\nhealthy answer\n</context>'
    # The hung source holds a few threads, then fails fast with the reason.
    timed_out = [o for o in stuck_rows if o.status is Status.TIMEOUT]
    refused = [o for o in stuck_rows if o.status is Status.FAILED]
    assert len(timed_out) + len(refused) == 44
    assert len(timed_out) <= 10 and len(refused) >= 30
    for o in refused:
        assert o.error_type == "WorkersExhausted"
        assert "still stuck in worker threads" in o.reason
    # Refused at once: a refused turn never entered the hung source (only the rows
    # that timed out did), so it cost no thread and no wait.
    assert len(entered) == len(timed_out)
    assert _threads.stats()["abandoned"] <= 10


async def test_a_stuck_sqlite_source_fails_fast_once_its_cap_is_reached(
        tmp_path: Path, release: threading.Event) -> None:
    # A SQL function that hangs stands for a query stuck in the driver.
    import sqlite3

    from lionctx.providers import SqliteContextProvider

    db = tmp_path / "kb.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    con.close()
    p = SqliteContextProvider(db, "SELECT x FROM t")
    real_run = p._run

    def hung(*args: Any) -> Any:
        release.wait(30)
        return real_run(*args)

    p._run = hung  # type: ignore[method-assign, assignment]
    rows = []
    for _ in range(_threads._per_key + 2):
        res = await resolve_context([p], "q", None, timeout=0.1)
        rows.append(res.outcomes[0])
    assert [o.status for o in rows[:_threads._per_key]] == [Status.TIMEOUT] * _threads._per_key
    for o in rows[_threads._per_key:]:
        assert o.status is Status.FAILED and o.error_type == "WorkersExhausted"
    assert p.last_error is not None
    assert "still stuck" in p.last_error


# -- the filesystem walk ---------------------------------------------------------------

class SlowDisk(FilesystemContextProvider):
    """The real provider on a slow disk: every file read takes 20 ms."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads = 0
        self.slow = True

    def _read_file(self, *args: Any) -> Any:
        self.reads += 1
        if self.slow:
            time.sleep(0.02)
        return super()._read_file(*args)


def tree(base: Path, n: int) -> None:
    for i in range(n):
        (base / f"f{i:04d}.md").write_text(f"file {i}")


@pytest.mark.parametrize("face", ["sequential", "resolve"])
async def test_a_slow_walk_is_abandoned_and_stops_early(
        tmp_path: Path, face: str) -> None:
    tree(tmp_path, 150)  # 150 x 20 ms = 3 s to walk
    p = SlowDisk(tmp_path, max_files=1000)
    outcomes, text = await run_face(face, [p], timeout=0.3)
    assert p.reads < 150  # back while the walk was still reading
    assert outcomes[0].status is Status.TIMEOUT and text == ""
    # Told to stop, the abandoned walk quits at its next file, far from all 150.
    await anyio.sleep(0.3)
    reads = p.reads
    await anyio.sleep(0.3)
    assert p.reads == reads < 60


async def test_an_abandoned_walk_does_not_touch_the_warm_cache(tmp_path: Path) -> None:
    tree(tmp_path, 100)
    p = SlowDisk(tmp_path, max_files=1000)
    p.slow = False
    first = await p.fetch("", None)
    assert first is not None and len(p.last_included) == 100
    # Every file changes, then a walk that times out part way through re-reading.
    for i in range(100):
        (tmp_path / f"f{i:04d}.md").write_text(f"changed {i}")
    (tmp_path / "f0100.md").write_text("new")
    p.slow = True
    res = await resolve_context([p], "q", None, timeout=0.2)
    assert res.outcomes[0].status is Status.TIMEOUT
    # What the provider last published still describes the last finished walk.
    assert len(p.last_included) == 100 and p.degradation_reason is None
    assert "f0100.md" not in p.last_included
    await anyio.sleep(0.1)
    p.slow = False
    again = await p.fetch("", None)
    assert again is not None and again.startswith("# f0000.md\nchanged 0\n")
    assert "file " not in again and len(p.last_included) == 101


async def test_the_cache_wrapper_never_stores_an_abandoned_result(
        release: threading.Event) -> None:
    calls: list[int] = []

    def fetch(ctx: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            release.wait(3)
            return "LATE"
        return "fresh"

    cached = CachedContextProvider(DatabaseContextProvider("db", fetch), 60)
    first = await resolve_context([cached], "q", None, timeout=0.2)
    assert first.outcomes[0].status is Status.TIMEOUT
    release.set()
    await anyio.sleep(0.05)
    second = await resolve_context([cached], "q", None, timeout=2)
    assert second.text == '<context name="db">\nfresh\n</context>'
    third = await resolve_context([cached], "q", None, timeout=2)
    assert third.outcomes[0].cached and third.text == second.text


async def test_calls_cancelled_before_a_thread_ran_them_leave_nothing_stuck(
        tmp_path: Path) -> None:
    # A timeout so short it fires before any worker thread picks the call up. Such
    # calls used to count as stuck forever, so after a few of them the source (and
    # after 32, every source) failed with WorkersExhausted for good.
    tree(tmp_path, 3)
    p = FilesystemContextProvider(tmp_path)
    before = _threads.stats()
    for _ in range(3 * _threads._per_key):
        with anyio.move_on_after(0):
            await p.fetch("", None)
        res = await resolve_context([p], "q", None, timeout=1e-6)
        assert res.outcomes[0].status is Status.TIMEOUT
    for _ in range(200):  # anything that did start finishes at once
        if _threads.stats()["abandoned"] == before["abandoned"]:
            break
        await anyio.sleep(0.01)
    assert _threads.stats()["running"] == before["running"]
    res = await resolve_context([p], "q", None, timeout=5)
    assert res.outcomes[0].status is Status.FIRED, res.outcomes[0].reason


async def test_a_burst_of_calls_to_a_hung_source_cannot_take_the_pool(
        release: threading.Event) -> None:
    def stuck(ctx: Any) -> str:
        release.wait(30)
        return "never"

    def healthy(ctx: Any) -> str:
        return "healthy answer"

    rows: list[Any] = []

    async def stuck_turn() -> None:
        res = await resolve_context([DatabaseContextProvider("stuck", stuck)], "q", None,
                                    timeout=0.2)
        rows.append(res.outcomes[0])

    async with anyio.create_task_group() as tg:
        for _ in range(44):  # all at once, before any of them has been abandoned
            tg.start_soon(stuck_turn)
    # Each row: its timeout, or (once the source's threads were abandoned) a fast
    # refusal that says why.
    for o in rows:
        assert o.status is Status.TIMEOUT or (
            o.status is Status.FAILED and o.error_type == "WorkersExhausted"), o
    # The hung source holds a bounded share of the pool, not all of it.
    assert _threads.stats()["abandoned"] <= max(_threads._per_key, _threads.max_threads() // 4)
    res = await resolve_context([DatabaseContextProvider("healthy", healthy)], "q", None,
                                timeout=1.0)
    assert res.outcomes[0].status is Status.FIRED, res.outcomes[0].reason


async def test_a_busy_healthy_source_still_gets_every_call_done() -> None:
    def quick(ctx: Any) -> str:
        time.sleep(0.01)
        return "ok"

    p = DatabaseContextProvider("quick", quick)
    results: list[Any] = []

    async def turn() -> None:
        res = await resolve_context([p], "q", None, timeout=10)
        results.append(res.outcomes[0].status)

    async with anyio.create_task_group() as tg:
        for _ in range(100):
            tg.start_soon(turn)
    assert results == [Status.FIRED] * 100


class _PerRequest:
    """A sync provider a service builds per request (one object per turn): one source."""

    name = "crm"

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def fetch(self, query: str, ctx: Any) -> str:
        self.release.wait(30)  # the CRM behind it hangs
        return "never"


class _Healthy:
    name = "rules"

    def fetch(self, query: str, ctx: Any) -> str:
        return "healthy answer"


async def test_a_hung_source_built_per_request_cannot_take_the_pool(
        release: threading.Event) -> None:
    # Each turn's provider is a new object; counted per object, its stuck calls never
    # reached the per-source cap, and one tenant's hung CRM took every thread: every
    # other sync source in the process then failed.
    rows: list[Any] = []

    async def turn() -> None:
        res = await resolve_context([_PerRequest(release)], "q", None, timeout=0.1)
        rows.append(res.outcomes[0])

    async with anyio.create_task_group() as tg:
        for _ in range(44):
            tg.start_soon(turn)
            await anyio.sleep(0.03)
    res = await resolve_context([_Healthy()], "q", None, timeout=1.0)
    assert res.outcomes[0].status is Status.FIRED, res.outcomes[0].reason
    assert _threads.stats()["abandoned"] <= max(_threads._per_key, _threads.max_threads() // 4)
    refused = [o for o in rows if o.status is Status.FAILED]
    assert refused and all("still stuck in worker threads" in o.reason for o in refused)


class _Named:
    """One class, a source per name: a sync reader of one of several backends."""

    def __init__(self, name: str, release: threading.Event | None) -> None:
        self.name, self.release = name, release

    def fetch(self, query: str, ctx: Any) -> str:
        if self.release is not None:
            self.release.wait(30)
        return f"{self.name} answer"


class _Unreadable:
    """Neither its identity nor its name can be read: still one source, contained."""

    @property
    def source_identity(self) -> str:
        raise RuntimeError("no identity")

    @property
    def name(self) -> str:
        raise RuntimeError("no name")

    def fetch(self, query: str, ctx: Any) -> str:
        return "unreadable answer"


async def test_a_hung_source_does_not_stop_another_source_of_its_class(
        release: threading.Event) -> None:
    # Counting stuck calls per source, not per object, must not join two sources that
    # share a class: the hung one's cap is its own.
    async def hung_turn() -> None:
        await resolve_context([_Named("crm-a", release)], "q", None, timeout=0.1)

    async with anyio.create_task_group() as tg:
        for _ in range(12):
            tg.start_soon(hung_turn)
            await anyio.sleep(0.03)
    assert (await resolve_context([_Named("crm-a", release)], "q", None, timeout=1.0)
            ).outcomes[0].error_type == "WorkersExhausted"
    res = await resolve_context([_Named("crm-b", None), _Unreadable()], "q", None,
                                timeout=1.0)
    assert [o.status for o in res.outcomes] == [Status.FIRED, Status.FIRED], res.outcomes
    assert "crm-b answer" in res.text and "unreadable answer" in res.text

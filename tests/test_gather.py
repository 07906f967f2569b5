import logging
import sys
from functools import partial

import anyio
import pytest
from lionctx import Status
from lionctx._call import ProviderCall
from lionctx._gather import gather
from lionctx._policy import check_seconds as validate_seconds

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("spawner")]

@pytest.fixture
def anyio_backend(both_backends):
    # concurrency, time and containment hold on asyncio and on trio alike
    return both_backends


if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup




def words(text):
    return len(text.split())


def call(name, fn, **kw):
    return ProviderCall(name, kw.pop("provider", None), fn, **kw)


def returning(value):
    async def fn():
        return value
    return fn


async def test_empty_list_gives_no_outcomes():
    assert await gather([], counter=words) == []


async def test_output_validation():
    class Sub(str):
        pass

    calls = [
        call("none", returning(None)),
        call("empty", returning("")),
        call("text", returning("a b c")),
        call("sub", returning(Sub("x y"))),
        call("zero", returning(0)),
        call("false", returning(False)),
        call("bytes", returning(b"a")),
        call("list", returning(["a"])),
    ]
    out = await gather(calls, counter=words)
    assert [o.name for o in out] == [c.name for c in calls]
    assert [o.status for o in out] == [
        Status.EMPTY, Status.EMPTY, Status.FIRED, Status.FIRED,
        Status.FAILED, Status.FAILED, Status.FAILED, Status.FAILED,
    ]
    assert out[2].tokens == 3 and out[2].text == "a b c"
    assert type(out[3].text) is str and out[3].tokens == 2
    assert out[4].error_type == "TypeError"
    assert "int" in out[4].reason


async def test_str_subclass_is_counted_once_as_plain_text():
    seen = []

    class Weird(str):
        def __str__(self):
            return "something else entirely"

    def counter(text):
        seen.append(text)
        return 1

    out = await gather([call("w", returning(Weird("real text")))], counter=counter)
    assert seen == ["real text"]
    assert out[0].text == "real text"


async def test_exceptions_are_contained_and_logged(caplog):
    async def boom():
        raise RuntimeError("kaput")

    caplog.set_level(logging.WARNING, logger="lionctx.gather")
    out = await gather([call("bad", boom), call("good", returning("ok"))], counter=words)
    assert out[0].status is Status.FAILED
    assert out[0].error_type == "RuntimeError" and out[0].error == "kaput"
    assert out[1].status is Status.FIRED
    assert any("bad" in r.getMessage() for r in caplog.records)


async def test_counter_failure_costs_that_provider_only():
    def counter(text):
        if "poison" in text:
            raise ValueError("cannot count")
        return 1

    out = await gather([call("p", returning("poison")), call("q", returning("fine"))],
                       counter=counter)
    assert out[0].status is Status.FAILED and out[0].error_type == "ValueError"
    assert out[1].status is Status.FIRED


async def test_bad_counter_result_is_a_failure():
    out = await gather([call("p", returning("x"))], counter=lambda t: -1)
    assert out[0].status is Status.FAILED


async def test_non_async_provider_fails_when_awaited():
    def sync():
        return "text"

    out = await gather([call("sync", sync)], counter=words)
    assert out[0].status is Status.FAILED and out[0].error_type == "TypeError"


async def test_degradation_reason_is_picked_up_even_for_none():
    class P:
        degradation_reason = "index stale"

    class Q:
        @property
        def degradation_reason(self):
            raise RuntimeError("no")

    out = await gather([
        call("p", returning(None), provider=P()),
        call("bad", returning(5), provider=P()),
        call("q", returning("x"), provider=Q()),
    ], counter=words)
    assert out[0].degradation_reason == "index stale" and out[0].status is Status.EMPTY
    assert out[1].degradation_reason == "index stale" and out[1].status is Status.FAILED
    assert out[2].degradation_reason is None and out[2].status is Status.FIRED


async def test_raising_provider_is_not_checked_for_degradation():
    class P:
        degradation_reason = "meh"

    async def boom():
        raise RuntimeError("x")

    out = await gather([call("p", boom, provider=P())], counter=words)
    assert out[0].degradation_reason is None


@pytest.mark.parametrize("concurrent", [False, True])
async def test_cancellation_from_the_caller_propagates(concurrent):
    started = anyio.Event()
    finished = []

    async def hang():
        started.set()
        try:
            await anyio.sleep(30)
        finally:
            finished.append("cleanup")

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            async def run():
                await gather([call("h", hang), call("i", hang)], counter=words,
                             concurrent=concurrent)
                finished.append("gather returned")  # must not happen
            tg.start_soon(run)
            await started.wait()
            scope.cancel()
    assert scope.cancelled_caught
    assert "gather returned" not in finished
    assert "cleanup" in finished


@pytest.mark.parametrize("concurrent", [False, True])
async def test_base_exception_propagates(concurrent):
    class Stop(BaseException):
        pass

    async def stop():
        raise Stop()

    with pytest.raises((Stop, BaseExceptionGroup)) as err:
        await gather([call("a", returning("x")), call("s", stop)], counter=words,
                     concurrent=concurrent)
    if isinstance(err.value, BaseExceptionGroup):
        assert err.value.subgroup(Stop) is not None


async def test_sequential_runs_in_registration_order():
    log = []

    async def step(name):
        log.append(("start", name))
        await anyio.sleep(0.01 if name == "a" else 0)
        log.append(("end", name))
        return name

    out = await gather([call(n, partial(step, n)) for n in "abc"], counter=words)
    assert log == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b"),
                   ("start", "c"), ("end", "c")]
    assert [o.text for o in out] == ["a", "b", "c"]


async def test_concurrent_providers_overlap_and_keep_order():
    b_started = anyio.Event()

    async def a():
        # only finishes if b runs at the same time
        with anyio.fail_after(5):
            await b_started.wait()
        return "from a"

    async def b():
        b_started.set()
        return "from b"

    out = await gather([call("a", a), call("b", b)], counter=words, concurrent=True)
    assert [o.text for o in out] == ["from a", "from b"]


async def test_concurrency_limit_is_respected():
    running = 0
    peak = 0

    async def work():
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        running -= 1
        return "x"

    out = await gather([call(str(i), work) for i in range(10)], counter=words,
                       concurrent=True, limit=3)
    assert peak == 3
    assert all(o.status is Status.FIRED for o in out)


@pytest.mark.parametrize("concurrent", [False, True])
async def test_per_provider_timeout_is_contained(concurrent):
    cleaned = []

    async def slow():
        try:
            await anyio.sleep(10)
        finally:
            cleaned.append(True)
        return "late"

    out = await gather([call("slow", slow), call("fast", returning("quick"))],
                       counter=words, concurrent=concurrent, timeout=0.05)
    assert out[0].status is Status.TIMEOUT
    assert "0.05" in out[0].reason
    assert out[1].status is Status.FIRED
    assert cleaned == [True]


async def test_call_timeout_overrides_pass_timeout():
    async def slowish():
        await anyio.sleep(0.05)
        return "done"

    out = await gather([call("s", slowish, timeout=5)], counter=words, timeout=0.001)
    assert out[0].status is Status.FIRED


async def test_provider_swallowing_its_cancellation_is_still_a_timeout():
    async def stubborn():
        try:
            await anyio.sleep(10)
        except BaseException:
            pass
        return "sneaky"

    out = await gather([call("s", stubborn)], counter=words, timeout=0.02)
    assert out[0].status is Status.TIMEOUT


@pytest.mark.parametrize("concurrent", [False, True])
async def test_deadline_cancels_stragglers_and_reports_them(concurrent):
    cleaned = []

    async def slow(name):
        try:
            await anyio.sleep(10)
        finally:
            cleaned.append(name)

    calls = [call("quick", returning("ok")), call("slow1", partial(slow, "slow1")),
             call("slow2", partial(slow, "slow2"))]
    out = await gather(calls, counter=words, concurrent=concurrent, deadline=0.05)
    assert [o.status for o in out] == [Status.FIRED, Status.TIMEOUT, Status.TIMEOUT]
    assert all("deadline" in o.reason for o in out[1:])
    if concurrent:
        assert sorted(cleaned) == ["slow1", "slow2"]
    else:
        # sequential: the second slow provider never started
        assert cleaned == ["slow1"]
        assert out[2].reason.startswith("not started")


def test_validate_seconds():
    assert validate_seconds(None, "t") is None
    assert validate_seconds(2, "t") == 2.0
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="timeoutMs"):
            validate_seconds(bad, "timeoutMs")
    for bad in ("5", True):
        with pytest.raises(TypeError, match="deadline"):
            validate_seconds(bad, "deadline")


@pytest.mark.parametrize("concurrent", [False, True])
async def test_observer_sees_each_outcome_as_it_lands(concurrent):
    seen = []

    async def slow():
        await anyio.sleep(0.05)
        return "slow"

    def observe(outcome):
        seen.append((outcome.name, outcome.status))
        if outcome.name == "fast":
            raise RuntimeError("observer bug must not cost the turn")

    out = await gather([call("slow", slow), call("fast", returning("fast")),
                        call("hang", partial(anyio.sleep, 10))],
                       counter=words, concurrent=concurrent, observe=observe, deadline=0.2)
    assert [o.status for o in out] == [Status.FIRED, Status.FIRED, Status.TIMEOUT]
    assert sorted(seen) == [("fast", Status.FIRED), ("hang", Status.TIMEOUT),
                            ("slow", Status.FIRED)]
    if concurrent:
        assert seen[0] == ("fast", Status.FIRED)  # completion order, not list order


async def test_first_pass_loads_the_encoding_off_the_event_loop(monkeypatch):
    # Loading takes most of a second; on the event loop it would stall (and time out)
    # providers running beside the first one to finish.
    import threading

    from lionctx import _tokens as tokens

    monkeypatch.setattr(tokens, "_encodings", {})
    threads = []
    real = tokens._load_o200k

    def recording_load(*a, **k):
        threads.append(threading.current_thread())
        return real(*a, **k)

    monkeypatch.setattr(tokens, "_load_o200k", recording_load)
    out = await gather([call("a", returning("hello")), call("b", returning("world"))],
                       counter=tokens.get_counter(), concurrent=True, timeout=5)
    assert [o.status for o in out] == [Status.FIRED, Status.FIRED]
    assert len(threads) == 1 and threads[0] is not threading.main_thread()


async def test_exception_whose_str_raises_is_still_contained():
    class Nasty(Exception):
        def __str__(self):
            raise RuntimeError("no str for you")

    async def boom():
        raise Nasty()

    out = await gather([call("n", boom), call("ok", returning("fine"))], counter=words,
                       concurrent=True)
    assert out[0].status is Status.FAILED
    assert out[0].error == "<unprintable Nasty>"
    assert out[1].status is Status.FIRED


async def test_expected_unavailability_is_logged_in_one_line(caplog):
    from lionctx import SourceUnavailable

    async def down():
        raise SourceUnavailable("HTTP 503 from http://127.0.0.1:1/status")

    caplog.set_level(logging.WARNING, logger="lionctx.gather")
    out = await gather([call("status", down)], counter=words)
    assert out[0].status is Status.FAILED
    assert out[0].reason == "SourceUnavailable: HTTP 503 from http://127.0.0.1:1/status"
    records = [r for r in caplog.records if "status" in r.getMessage()]
    assert records and all(r.exc_info is None for r in records)
    assert "HTTP 503" in records[0].getMessage()


# -- carried and memoized counts: same outcomes, fewer readings --------------------

@pytest.mark.parametrize("tagged", [False, True])
async def test_a_warm_source_is_counted_once_and_gives_the_same_outcome(tagged, monkeypatch):
    from lionctx import count_tokens as real_count
    from lionctx._render import tag_block
    from lionctx._tokens import clear_token_cache, get_counter, get_encoding
    from lionctx.providers import ProvidedText

    clear_token_cache()
    counter = get_counter()
    real_count("load")
    text = "# notes.md\n" + "line of notes with words " * 4_000  # over the thread size
    enc = get_encoding()
    encoded = []
    original = enc.encode_ordinary
    monkeypatch.setattr(enc, "encode_ordinary", lambda t: encoded.append(len(t)) or original(t))

    async def warm():
        return ProvidedText(text, cached=True)  # a new object around the same string

    calls = [call("notes", warm, frame=partial(tag_block, "notes") if tagged else None,
                  keep_frame=not tagged)]
    first = await gather(calls, counter=counter)
    assert encoded, "the first pass counts"
    encoded.clear()
    second = await gather(calls, counter=counter)
    assert encoded == []  # the second pass is a memo hit: nothing tokenized
    assert first[0].tokens == second[0].tokens and first[0].text == second[0].text
    expected = real_count(tag_block("notes", text) if tagged else text)
    assert second[0].tokens == expected and second[0].cached


async def test_a_str_subclass_that_lies_about_plain_is_copied():
    from lionctx.providers import ProvidedText

    lying = ProvidedText("real text")
    lying.plain = "other!!!!"  # same length, different text: taken, and it is what is
    out = await gather([call("x", returning(lying))], counter=len)  # sent and counted
    assert out[0].text == "other!!!!" and out[0].tokens == len("other!!!!")
    lying.plain = "short"  # a different length is never taken
    out = await gather([call("x", returning(lying))], counter=len)
    assert out[0].text == "real text" and out[0].tokens == len("real text")

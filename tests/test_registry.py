"""Face one: LionAGI's registry, with the behaviours LionAGI's own tests pin."""

import logging
import math
import sys

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import ContextProvider, ContextProviderRegistry, ProviderReport, Status, count_tokens

from tests.fakes import Raising, Static

pytestmark = pytest.mark.anyio


BRANCH = object()
INSTRUCTION = object()


# --- registration --------------------------------------------------------------

def test_empty_registry_is_falsy_and_empty():
    reg = ContextProviderRegistry()
    assert not reg and len(reg) == 0 and reg.names == []
    assert reg.budget == 2000


def test_name_resolution_order():
    class Named:
        name = "attr-name"

    class Unnamed:
        name = ""

    reg = ContextProviderRegistry()
    reg.register(Named(), name="explicit")
    reg.register(Named())
    reg.register(Unnamed())
    reg.register(Static("x"))
    assert reg.names == ["explicit", "attr-name", "Unnamed", "Static"]


def test_no_dedupe_and_names_is_a_new_list():
    reg = ContextProviderRegistry()
    p = Static("x", name="same")
    reg.register(p)
    reg.register(p)
    reg.register(Static("y", name="same"))
    assert len(reg) == 3 and bool(reg)
    names = reg.names
    names.append("mutated")
    assert reg.names == ["same", "same", "same"]


def test_register_does_not_validate_the_provider():
    reg = ContextProviderRegistry()
    reg.register(object())  # fails at gather time, contained
    assert reg.names == ["object"]


@pytest.mark.parametrize("kwargs, word", [
    ({"priority": None}, "priority"),
    ({"priority": "high"}, "priority"),
    ({"priority": float("nan")}, "priority"),
    ({"max_tokens": "10"}, "max_tokens"),
    ({"name": 5}, "name"),
    ({"timeout": 0}, "timeout"),
])
def test_register_refuses_values_that_would_fail_mid_turn(kwargs, word):
    reg = ContextProviderRegistry()
    with pytest.raises((TypeError, ValueError)) as err:
        reg.register(Static("x"), **kwargs)
    assert word in str(err.value)
    assert repr(list(kwargs.values())[0]) in str(err.value)
    assert len(reg) == 0


@pytest.mark.parametrize("bad", [None, "100", float("nan"), True])
def test_budget_must_be_a_number(bad):
    reg = ContextProviderRegistry()
    with pytest.raises(TypeError, match="budget"):
        reg.budget = bad
    with pytest.raises(TypeError, match="budget"):
        ContextProviderRegistry(budget=bad)
    assert reg.budget == 2000


def test_budget_is_mutable():
    reg = ContextProviderRegistry()
    reg.budget = 10
    assert reg.budget == 10


def test_protocol_is_runtime_checkable():
    assert isinstance(Static("x"), ContextProvider)
    assert not isinstance(object(), ContextProvider)


# --- gather ----------------------------------------------------------------------

async def test_empty_registry_gather_returns_empty_report_and_touches_no_stats():
    reg = ContextProviderRegistry()
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report == ProviderReport()
    assert (report.blocks, report.fired, report.skipped, report.failed) == ([], [], [], [])
    assert all(v == 0 for v in reg.stats.values())


def test_empty_registry_gather_imports_no_tokenizer():
    import subprocess

    code = (
        "import sys, anyio\n"
        "from lionctx import ContextProviderRegistry\n"
        "r = anyio.run(ContextProviderRegistry().gather, None, None)\n"
        "assert r.blocks == []\n"
        "print('tiktoken' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


async def test_fired_names_and_token_counts():
    reg = ContextProviderRegistry()
    reg.register(Static("alpha beta", name="a"))
    reg.register(Static("gamma", name="b"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.blocks == ["alpha beta", "gamma"]
    assert report.fired == [
        {"provider_name": "a", "tokens": count_tokens("alpha beta")},
        {"provider_name": "b", "tokens": count_tokens("gamma")},
    ]
    assert report.skipped == [] and report.failed == []


async def test_providers_receive_the_exact_branch_and_instruction():
    p = Static("x")
    reg = ContextProviderRegistry()
    reg.register(p)
    reg.register(p)
    await reg.gather(BRANCH, INSTRUCTION)
    assert p.calls == [(BRANCH, INSTRUCTION), (BRANCH, INSTRUCTION)]


async def test_none_and_empty_are_invisible_in_the_lists():
    reg = ContextProviderRegistry()
    reg.register(Static(None, name="n"))
    reg.register(Static("", name="e"))
    reg.register(Static("x", name="x"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == ["x"]
    assert report.skipped == [] and report.failed == []
    assert [o.status for o in report.outcomes] == [Status.EMPTY, Status.EMPTY, Status.FIRED]


async def test_raising_provider_is_contained_while_others_render(caplog):
    caplog.set_level(logging.WARNING)
    reg = ContextProviderRegistry()
    reg.register(Static("before", name="b"))
    reg.register(Raising())
    reg.register(Static("after", name="a"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.blocks == ["before", "after"]
    assert report.failed == ["raising"]
    row = report.outcomes[1]
    assert row.status is Status.FAILED and row.error == "source down"
    assert any(r.exc_info for r in caplog.records if "raising" in r.getMessage())


@pytest.mark.parametrize("bad", [0, False, b"bytes", ["list"], object()])
async def test_bad_output_is_contained(bad):
    reg = ContextProviderRegistry()
    reg.register(Static(bad, name="bad"))
    reg.register(Static("ok", name="ok"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.failed == ["bad"]
    assert report.blocks == ["ok"]


async def test_missing_or_sync_provide_is_a_contained_failure():
    class SyncProvide:
        def provide(self, branch, instruction):
            return "text"

    reg = ContextProviderRegistry()
    reg.register(object(), name="nothing")
    reg.register(SyncProvide())
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.failed == ["nothing", "SyncProvide"]


async def test_fetch_only_provider_is_adapted():
    class FetchOnly:
        name = "fetcher"

        async def fetch(self, query, ctx):
            return f"{query} for {ctx.user_id}"

    class Branch:
        run_context = {"userId": "u1"}

    class Instruction:
        instruction = "what's new"

    reg = ContextProviderRegistry()
    reg.register(FetchOnly())
    report = await reg.gather(Branch(), Instruction())
    assert report.blocks == ["what's new for u1"]


async def test_lowest_priority_dropped_first_over_budget():
    reg = ContextProviderRegistry(budget=count_tokens("one two three") * 2)
    reg.register(Static("one two three", name="low"), priority=0)
    reg.register(Static("one two three", name="high"), priority=5)
    reg.register(Static("one two three", name="mid"), priority=2)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == ["high", "mid"]
    assert report.skipped == ["low"]
    assert report.outcomes[0].status is Status.SKIPPED_BUDGET
    assert "budget" in report.outcomes[0].reason


async def test_cap_skips_then_budget_skips_in_priority_order():
    reg = ContextProviderRegistry(budget=3)
    reg.register(Static("a b c d e f", name="capped1"), max_tokens=2)
    reg.register(Static("x y z", name="p1"), priority=1)
    reg.register(Static("x y z", name="p9"), priority=9)
    reg.register(Static("x y z", name="p5"), priority=5)
    reg.register(Static("a b c d e f", name="capped2"), max_tokens=1)
    reg.register(Static("z", name="p0"), priority=0)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == ["p9"]
    assert report.skipped == ["capped1", "capped2", "p5", "p1", "p0"]
    assert report.outcomes[0].status is Status.SKIPPED_CAP
    assert "cap" in report.outcomes[0].reason


async def test_cap_equal_fits_zero_means_no_cap_negative_skips():
    text = "a b c"
    n = count_tokens(text)
    reg = ContextProviderRegistry()
    reg.register(Static(text, name="eq"), max_tokens=n)
    reg.register(Static(text, name="zero"), max_tokens=0)
    reg.register(Static(text, name="neg"), max_tokens=-1)
    reg.register(Static(text, name="under"), max_tokens=n - 1)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == ["eq", "zero"]
    assert report.skipped == ["neg", "under"]


async def test_zero_budget_keeps_nothing_with_tokens():
    reg = ContextProviderRegistry(budget=0)
    reg.register(Static("x", name="x"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.blocks == [] and report.skipped == ["x"]


async def test_special_token_text_cannot_bypass_a_cap():
    reg = ContextProviderRegistry()
    reg.register(Static("<|endoftext|>" * 50, name="sneaky"), max_tokens=10)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.skipped == ["sneaky"]


async def test_tokenizer_error_is_contained():
    def counter(text):
        raise RuntimeError("tokenizer broke")

    reg = ContextProviderRegistry(counter=counter)
    reg.register(Static("x", name="x"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.failed == ["x"]


async def test_degraded_rows_and_warning(caplog):
    class Degraded(Static):
        degradation_reason = "half the index"

    class Blank(Static):
        degradation_reason = ""

    caplog.set_level(logging.WARNING)
    reg = ContextProviderRegistry()
    reg.register(Degraded(None, name="d1"))
    reg.register(Degraded(5, name="d2"))
    reg.register(Blank("x", name="blank"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.degraded == [
        {"provider_name": "d1", "reason": "half the index"},
        {"provider_name": "d2", "reason": "half the index"},
    ]
    assert report.failed == ["d2"]
    assert any("half the index" in r.getMessage() for r in caplog.records)


async def test_stats_accumulate_across_passes():
    class Degraded(Static):
        degradation_reason = "d"

    reg = ContextProviderRegistry()
    reg.register(Static("x", name="x"))
    reg.register(Static("y", name="y"))
    reg.register(Raising())
    reg.register(Degraded(None, name="d"))
    await reg.gather(BRANCH, INSTRUCTION)
    await reg.gather(BRANCH, INSTRUCTION)
    assert reg.stats == {
        "recall_turns": 2, "blocks_injected": 4, "failed": 2, "degraded_turns": 2,
        "writeback_records": 0, "writeback_failed": 0,
    }
    reg.budget = 0
    await reg.gather(BRANCH, INSTRUCTION)
    assert reg.stats["recall_turns"] == 2  # nothing fired on this pass


async def test_report_extras_budget_used_and_outcomes():
    reg = ContextProviderRegistry(budget=100)
    reg.register(Static("a b", name="a"))
    reg.register(Static(None, name="n"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.budget == 100
    assert report.used_tokens == report.offered_tokens == count_tokens("a b")
    assert [o.name for o in report.outcomes] == ["a", "n"]
    took = report.duration_ms  # present and a float; its size is for benchmarks
    assert isinstance(took, float) and took >= 0.0
    data = report.to_dict()
    assert data["outcomes"][0]["status"] == "fired" and "text" not in data["outcomes"][0]


async def test_skipped_report_for_systemless_pass():
    reg = ContextProviderRegistry()
    reg.register(Static("x", name="a"))
    reg.register(Static("y", name="b"))
    report = reg.skipped_report()
    assert report.skipped == ["a", "b"] and report.blocks == []
    assert {o.status for o in report.outcomes} == {Status.SKIPPED}


# --- opt-in concurrency, timeouts, deadline -------------------------------------

async def test_concurrent_registry_with_timeout_and_deadline():
    class Slow:
        name = "slow"

        async def provide(self, branch, instruction):
            await anyio.sleep(10)

    reg = ContextProviderRegistry(concurrent=True, timeout=0.05)
    reg.register(Slow())
    reg.register(Static("fast", name="fast"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.blocks == ["fast"]
    assert report.failed == ["slow"]
    assert report.outcomes[0].status is Status.TIMEOUT

    reg2 = ContextProviderRegistry(deadline=0.05)
    reg2.register(Static("fast", name="fast"))
    reg2.register(Slow(), timeout=60)
    report2 = await reg2.gather(BRANCH, INSTRUCTION)
    assert report2.blocks == ["fast"]
    assert report2.outcomes[1].status is Status.TIMEOUT


def test_registry_settings_are_checked():
    with pytest.raises(ValueError, match="deadline"):
        ContextProviderRegistry(deadline=-1)
    with pytest.raises(ValueError, match="limit"):
        ContextProviderRegistry(limit=0)
    with pytest.raises(TypeError, match="counter"):
        ContextProviderRegistry(counter=3)  # type: ignore[arg-type]


def test_copy_has_same_entries_and_fresh_stats():
    reg = ContextProviderRegistry(budget=7)
    reg.register(Static("x", name="a"), priority=3, max_tokens=4)
    reg.stats["failed"] = 9
    new = reg.copy()
    assert new.names == ["a"] and new.budget == 7
    assert new.stats["failed"] == 0
    new.register(Static("y"))
    assert len(reg) == 1


# --- writeback -------------------------------------------------------------------

async def test_writeback_calls_hooks_in_order_with_branch_and_responses(caplog):
    log = []

    class W(Static):
        def __init__(self, name, ret):
            super().__init__("x", name)
            self.ret = ret

        async def writeback(self, branch, responses):
            log.append((self.name, branch, responses))
            if isinstance(self.ret, Exception):
                raise self.ret
            return self.ret

    class SyncW(Static):
        def writeback(self, branch, responses):
            log.append(("sync", branch, responses))
            return 3

    caplog.set_level(logging.WARNING)
    reg = ContextProviderRegistry()
    responses = [{"tool": "t", "output": 1}]
    reg.register(W("ints", 2))
    reg.register(Static("no hook", name="nohook"))
    reg.register(W("raises", RuntimeError("disk full")))
    reg.register(W("bool", True))
    reg.register(W("neg", -1))
    reg.register(W("str", "ignored"))
    reg.register(SyncW("x", name="sync"))
    await reg.gather_writeback(BRANCH, responses)
    assert [entry[0] for entry in log] == ["ints", "raises", "bool", "neg", "str", "sync"]
    assert all(entry[1] is BRANCH and entry[2] is responses for entry in log)
    assert reg.stats["writeback_records"] == 2 + 1 - 1
    assert reg.stats["writeback_failed"] == 2  # the raiser and the sync hook
    assert any("context provider 'raises' writeback raised; skipping" in r.getMessage()
               for r in caplog.records)


async def test_writeback_cancellation_propagates():
    class W(Static):
        async def writeback(self, branch, responses):
            await anyio.sleep(10)

    reg = ContextProviderRegistry()
    reg.register(W("x"))
    with anyio.move_on_after(0.02) as scope:
        await reg.gather_writeback(BRANCH, [1])
    assert scope.cancelled_caught
    assert reg.stats["writeback_failed"] == 0


# --- property: the registry's lists agree with its outcomes ------------------------

texts = st.one_of(st.none(), st.just(""), st.text(alphabet="ab ", max_size=30), st.integers())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(texts, st.integers(-2, 2), st.one_of(st.none(), st.integers(-1, 8))),
                max_size=8),
       st.integers(-2, 30))
def test_report_lists_agree_with_outcomes(specs, budget):
    reg = ContextProviderRegistry(budget=budget, counter=lambda t: len(t.split()))
    for i, (text, priority, cap) in enumerate(specs):
        reg.register(Static(text, name=f"p{i}"), priority=priority, max_tokens=cap)
    report = anyio.run(reg.gather, BRANCH, INSTRUCTION)
    by_status = {}
    for o in report.outcomes:
        by_status.setdefault(o.status, []).append(o.name)
    assert report.names == by_status.get(Status.FIRED, [])
    assert sorted(report.skipped) == sorted(
        by_status.get(Status.SKIPPED_CAP, []) + by_status.get(Status.SKIPPED_BUDGET, []))
    assert report.failed == by_status.get(Status.FAILED, [])
    assert report.used_tokens == sum(r["tokens"] for r in report.fired)
    if budget >= 0:
        assert report.used_tokens <= budget
    assert not math.isnan(report.used_tokens)


async def test_unloadable_encoding_fails_each_provider_not_the_pass():
    reg = ContextProviderRegistry(counter="no-such-encoding")
    reg.register(Static("x", name="a"))
    reg.register(Static(None, name="b"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.failed == ["a"]
    assert report.outcomes[1].status is Status.EMPTY


async def test_writeback_property_that_raises_is_contained():
    class Bad(Static):
        @property
        def writeback(self):
            raise RuntimeError("no hook")

    reg = ContextProviderRegistry()
    reg.register(Bad("x", name="bad"))
    await reg.gather_writeback(BRANCH, [1])
    assert reg.stats["writeback_failed"] == 1


def test_huge_numbers_and_limit_types():
    reg = ContextProviderRegistry(budget=10**400)
    reg.register(Static("x"), max_tokens=10**400, priority=10**400)
    with pytest.raises(TypeError, match="limit"):
        ContextProviderRegistry(limit="2")  # type: ignore[arg-type]


def test_label_is_not_a_lionagi_name():
    class Labelled:
        label = "from-label"

        async def provide(self, branch, instruction):
            return "x"

    reg = ContextProviderRegistry()
    reg.register(Labelled())
    assert reg.names == ["Labelled"]


# --- coverage audit additions: ADR-0008 D1, D2, D3, D5, D7 exact semantics -----------

async def test_same_name_twice_is_two_entries_both_called_no_replacement():
    # D1: no duplicate-name check, no replacement by name, no unregister method.
    first, second = Static("one", name="dup"), Static("two", name="dup")
    reg = ContextProviderRegistry()
    reg.register(first)
    reg.register(second)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert len(first.calls) == 1 and len(second.calls) == 1
    assert report.blocks == ["one", "two"]
    assert report.names == ["dup", "dup"]
    assert not hasattr(reg, "unregister")


async def test_default_pass_runs_providers_one_at_a_time_in_registration_order():
    # D2: sequential, in registration order, no parallel tasks, no timeout by default.
    log = []

    class Step:
        def __init__(self, name, pause):
            self.name, self.pause = name, pause

        async def provide(self, branch, instruction):
            log.append(("start", self.name))
            await anyio.sleep(self.pause)  # a yield point: a parallel pass would interleave
            log.append(("end", self.name))
            return self.name

    reg = ContextProviderRegistry()
    assert reg.concurrent is False and reg.timeout is None and reg.deadline is None
    for name, pause in (("c", 0.02), ("a", 0), ("b", 0.01)):
        reg.register(Step(name, pause))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert log == [("start", "c"), ("end", "c"), ("start", "a"), ("end", "a"),
                   ("start", "b"), ("end", "b")]
    assert report.blocks == ["c", "a", "b"]


async def test_base_exception_from_a_provider_escapes_gather_and_stops_the_pass():
    # D2: a BaseException outside Exception is not contained.
    class Abort(BaseException):
        pass

    class Aborting:
        name = "aborting"

        async def provide(self, branch, instruction):
            raise Abort()

    later = Static("later", name="later")
    reg = ContextProviderRegistry()
    reg.register(Static("first", name="first"))
    reg.register(Aborting())
    reg.register(later)
    with pytest.raises(Abort):
        await reg.gather(BRANCH, INSTRUCTION)
    assert later.calls == []
    assert all(v == 0 for v in reg.stats.values())


async def test_a_result_whose_truthiness_check_raises_is_a_contained_failure():
    # REFERENCE 1: an object whose truthiness check raises also fails (not escapes).
    class NoBool:
        def __bool__(self):
            raise RuntimeError("ambiguous truth value")

        def __len__(self):
            raise RuntimeError("no len either")

    reg = ContextProviderRegistry()
    reg.register(Static(NoBool(), name="nobool"))
    reg.register(Static("ok", name="ok"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.failed == ["nobool"]
    assert report.blocks == ["ok"]
    assert report.outcomes[0].status is Status.FAILED


async def test_a_failing_provider_is_attempted_once_per_pass_no_retry():
    # D2: a transient failure is attempted once.
    class Flaky:
        name = "flaky"

        def __init__(self):
            self.calls = 0

        async def provide(self, branch, instruction):
            self.calls += 1
            if self.calls == 1:
                raise ConnectionError("transient")
            return "recovered"

    flaky = Flaky()
    reg = ContextProviderRegistry()
    reg.register(flaky)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert flaky.calls == 1
    assert report.failed == ["flaky"] and report.blocks == []
    report = await reg.gather(BRANCH, INSTRUCTION)  # the next pass calls it again, once
    assert flaky.calls == 2 and report.blocks == ["recovered"]


async def test_every_provider_is_called_before_selection_even_those_dropped():
    # D2/P3: the budget bounds selected text, not retrieval: dropped blocks were fetched.
    capped = Static("a b c d e f g h", name="capped")
    dropped = Static("x y z", name="dropped")
    kept = Static("k", name="kept")
    reg = ContextProviderRegistry(budget=count_tokens("k"))
    reg.register(capped, max_tokens=1)
    reg.register(dropped, priority=-1)
    reg.register(kept)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == ["kept"] and report.skipped == ["capped", "dropped"]
    assert len(capped.calls) == len(dropped.calls) == len(kept.calls) == 1


async def test_kept_blocks_come_back_in_registration_order_not_priority_order():
    # D3: priority affects admission only; blocks and fired are rebuilt in registration order.
    reg = ContextProviderRegistry(counter=lambda t: len(t.split()))
    reg.register(Static("a", name="p0"), priority=0)
    reg.register(Static("b", name="p9"), priority=9)
    reg.register(Static("c", name="p4"), priority=4)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.blocks == ["a", "b", "c"]
    assert report.fired == [{"provider_name": "p0", "tokens": 1},
                            {"provider_name": "p9", "tokens": 1},
                            {"provider_name": "p4", "tokens": 1}]
    assert all(set(row) == {"provider_name", "tokens"} and type(row["tokens"]) is int
               for row in report.fired)


async def test_equal_priorities_fill_the_budget_in_registration_order():
    # D3: stable sort; ties keep registration order under budget pressure.
    reg = ContextProviderRegistry(budget=2, counter=lambda t: len(t.split()))
    for name in ("first", "second", "third"):
        reg.register(Static("w", name=name), priority=1)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == ["first", "second"] and report.skipped == ["third"]


async def test_oversized_high_priority_block_skipped_while_a_smaller_later_one_fits():
    # D3: greedy walk goes on after a skip.
    reg = ContextProviderRegistry(budget=3, counter=lambda t: len(t.split()))
    reg.register(Static("w w w w", name="big"), priority=9)
    reg.register(Static("w w", name="mid"), priority=5)
    reg.register(Static("w w", name="low"), priority=1)
    reg.register(Static("w", name="tiny"), priority=0)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == ["mid", "tiny"]
    assert report.skipped == ["big", "low"]
    assert report.used_tokens == 3


async def test_negative_budget_skips_text_and_zero_token_block_fits_zero_budget():
    # D3: zero or negative budget skips any block with a positive count; a zero-token
    # block fits a zero budget.
    reg = ContextProviderRegistry(budget=0, counter=lambda t: len(t.split()))
    reg.register(Static(" ", name="zero-tokens"))  # non-empty text that counts 0
    reg.register(Static("w", name="one-token"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == ["zero-tokens"] and report.skipped == ["one-token"]
    assert report.fired == [{"provider_name": "zero-tokens", "tokens": 0}]
    reg.budget = -5
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.names == [] and report.skipped == ["zero-tokens", "one-token"]


async def test_no_cap_by_default_and_none_cap_keeps_a_large_block_whole():
    # D3: max_tokens=None means no per-provider cap; nothing is ever truncated.
    text = "word " * 500
    reg = ContextProviderRegistry(budget=10**6)
    reg.register(Static(text, name="default"))
    reg.register(Static(text, name="none"), max_tokens=None)
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.blocks == [text, text] and report.skipped == []


async def test_report_is_frozen_and_its_lists_are_the_callers_copies():
    # D5: frozen at the attribute level; each read gives the caller a new list, so a
    # caller's change never makes the view disagree with its report.
    import dataclasses

    reg = ContextProviderRegistry()
    empty1 = await reg.gather(BRANCH, INSTRUCTION)
    empty2 = await reg.gather(BRANCH, INSTRUCTION)
    assert empty1 is not empty2
    empty1.skipped.append("mutated")
    assert empty2.skipped == []
    reg.register(Static("x", name="x"))
    report = await reg.gather(BRANCH, INSTRUCTION)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.blocks = []  # type: ignore[misc]
    report.blocks.append("added by a caller")
    report.failed.append("also")
    report.fired.clear()
    assert report.blocks == ["x"] == [o.text for o in report.report.kept]
    assert report.failed == [] and report.fired == [{"provider_name": "x", "tokens": 1}]
    again = await reg.gather(BRANCH, INSTRUCTION)
    assert again.blocks == ["x"] and again.failed == []


async def test_failed_lists_the_name_only_and_the_log_carries_the_traceback(caplog):
    # D5: failed holds names without the exception value; the warning has the traceback.
    caplog.set_level(logging.WARNING)
    reg = ContextProviderRegistry()
    reg.register(Raising())
    report = await reg.gather(BRANCH, INSTRUCTION)
    assert report.failed == ["raising"]
    assert all(isinstance(n, str) for n in report.failed)
    records = [r for r in caplog.records if "raising" in r.getMessage()]
    assert records and records[0].exc_info and isinstance(records[0].exc_info[1], RuntimeError)


async def test_writeback_hooks_run_one_after_another_and_a_raiser_logs_a_traceback(caplog):
    # D7: hooks execute sequentially in registration order; an Exception is warned with
    # its traceback and contained; later hooks still run; nothing is returned.
    log = []

    class Hook(Static):
        def __init__(self, name, pause, fail=False):
            super().__init__("x", name)
            self.pause, self.fail = pause, fail

        async def writeback(self, branch, responses):
            log.append(("start", self.name))
            await anyio.sleep(self.pause)
            log.append(("end", self.name))
            if self.fail:
                raise ValueError("write refused")
            return 1

    caplog.set_level(logging.WARNING)
    reg = ContextProviderRegistry()
    reg.register(Hook("slow", 0.02))
    reg.register(Hook("failing", 0, fail=True))
    reg.register(Hook("last", 0))
    result = await reg.gather_writeback(BRANCH, ["r"])
    assert result is None
    assert log == [("start", "slow"), ("end", "slow"), ("start", "failing"),
                   ("end", "failing"), ("start", "last"), ("end", "last")]
    assert reg.stats["writeback_records"] == 2 and reg.stats["writeback_failed"] == 1
    records = [r for r in caplog.records
               if r.getMessage() == "context provider 'failing' writeback raised; skipping"]
    assert len(records) == 1 and isinstance(records[0].exc_info[1], ValueError)

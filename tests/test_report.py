"""The one report core: ``Report``, ``build_report`` and its two views.

The rule proved here: no :class:`Outcome` is changed once it has been handed out.
An ``on_outcome`` observer keeps every row it is given with a snapshot of its
fields; after full passes of both faces (caps, budget skips, size skips, dedupe,
history, breakers open and half-open, volatile sources, digests, failures, timeouts,
degraded rows, tracing on and off) each row still has the snapshot's values.
"""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import (
    Breakers,
    BreakerSettings,
    CacheBreak,
    ContextProviderRegistry,
    InvalidType,
    Outcome,
    ProviderReport,
    Report,
    Resolution,
    Status,
    resolve_context,
    telemetry,
)
from lionctx._admission import admit
from lionctx._report import build_report
from lionctx._stability import digest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .fakes import FakeClock

pytestmark = pytest.mark.anyio

FIELDS = tuple(f.name for f in dataclasses.fields(Outcome))


def snapshot(o: Outcome) -> dict[str, Any]:
    return {name: getattr(o, name) for name in FIELDS}


class Keeper:
    """An ``on_outcome`` observer that keeps what it saw and how it looked."""

    def __init__(self) -> None:
        self.seen: list[tuple[Outcome, dict[str, Any]]] = []

    def __call__(self, o: Outcome) -> None:
        self.seen.append((o, snapshot(o)))

    def assert_untouched(self) -> None:
        assert self.seen
        for o, before in self.seen:
            assert snapshot(o) == before, f"{o.name!r} changed after the observer saw it"


# -- providers of every kind (both shapes) --------------------------------------------

class Text:
    def __init__(self, name: str, text: Any, *, delay: float = 0.0, volatile: bool = False,
                 degraded: str | None = None) -> None:
        self.name, self.text, self.delay = name, text, delay
        if volatile:
            self.volatile = True
        if degraded is not None:
            self.degradation_reason = degraded

    async def provide(self, branch: Any, instruction: Any) -> Any:
        await anyio.sleep(self.delay)
        return self.text

    async def fetch(self, query: Any, ctx: Any) -> Any:
        return await self.provide(None, None)


class Flaky(Text):
    """Fails while ``down``; answers otherwise."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "flaky is back")
        self.down = True

    async def provide(self, branch: Any, instruction: Any) -> Any:
        if self.down:
            raise RuntimeError("flaky is down")
        return self.text


class Raises(Text):
    async def provide(self, branch: Any, instruction: Any) -> Any:
        raise RuntimeError("boom")


@pytest.fixture(params=[False, True], ids=["untraced", "traced"])
def traced(request: pytest.FixtureRequest) -> Any:
    if not request.param:
        yield False
        return
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(tracer_provider=tp)
    telemetry.set_enabled(True)
    yield exporter
    telemetry.configure()
    telemetry.set_enabled(None)


def _sources(flaky: Flaky) -> list[Text]:
    return [
        Text("alpha", "alpha text"),
        Text("capped", "one two three four five six seven"),
        Text("mid", "word " * 12),
        Text("mid2", "verb " * 12),
        Text("big", "noun " * 400),
        Text("dup", "alpha text"),
        Text("vol", "tick 1", volatile=True),
        Text("sized", "x" * 50),
        Raises("raises", None),
        Text("nonstr", 42, degraded="serving from a replica"),
        Text("slow", "late", delay=5.0),
        Text("empty", None),
        flaky,
    ]


async def test_no_outcome_changes_after_the_observer_saw_it_registry(traced: Any) -> None:
    clock = FakeClock()
    keeper = Keeper()
    reg = ContextProviderRegistry(
        budget=60, concurrent=True, timeout=0.3, on_outcome=keeper, dedupe=True,
        breaker=Breakers(BreakerSettings(threshold=1, cooldown=10.0), clock=clock))
    flaky = Flaky("flaky")
    for p in _sources(flaky):
        reg.register(p, priority={"alpha": 2, "mid": 1, "mid2": -1}.get(p.name, 0),
                     max_tokens=3 if p.name == "capped" else None,
                     max_chars=10 if p.name == "sized" else None)
    first = await reg.gather(None, None, tagged=True)
    statuses = {o.name: o.status for o in first.outcomes}
    assert statuses == {
        "alpha": Status.FIRED, "capped": Status.SKIPPED_CAP, "mid": Status.FIRED,
        "mid2": Status.SKIPPED_BUDGET, "big": Status.SKIPPED_BUDGET, "dup": Status.SKIPPED,
        "vol": Status.FIRED, "sized": Status.SKIPPED_SIZE, "raises": Status.FAILED,
        "nonstr": Status.FAILED, "slow": Status.TIMEOUT, "empty": Status.EMPTY,
        "flaky": Status.FAILED}
    by_name = {o.name: o for o in first.outcomes}
    assert by_name["nonstr"].degradation_reason == "serving from a replica"
    assert by_name["vol"].volatile and by_name["alpha"].digest == digest("alpha text")
    assert by_name["mid2"].digest is None  # counted whole, digested, then not kept
    if traced:
        assert all(o.started_ns is not None for o in first.outcomes
                   if o.status is not Status.SKIPPED)
    # The observer saw the gathered rows: admission and dedupe made new ones.
    seen = {o.name: o for o, _ in keeper.seen}
    assert seen["mid2"].status is Status.FIRED and seen["dup"].status is Status.FIRED
    assert seen["mid2"] is not by_name["mid2"]
    keeper.assert_untouched()

    # Pass 2: flaky's circuit is open (not called: a row of its own); the others are
    # gathered at other positions and placed back where they belong.
    second = await reg.gather(None, None, tagged=True)
    row = second.outcomes[-1]
    assert row.name == "flaky" and row.status is Status.SKIPPED and row.circuit == "open"
    assert [o.index for o in second.outcomes] == list(range(len(second.outcomes)))
    assert second.prefix_stable is True
    keeper.assert_untouched()

    # Pass 3: after the cool-down, one trial call (half-open) that succeeds.
    flaky.down = False
    clock.advance(11.0)
    third = await reg.gather(None, None, tagged=True)
    row = third.outcomes[-1]
    assert row.status is Status.FIRED and row.circuit == "half_open"
    assert third.cache_break == CacheBreak("flaky", "appeared", 2)  # before "vol"
    keeper.assert_untouched()
    observed = [o for o, _ in keeper.seen if o.name == "flaky"]
    assert observed[-1].circuit is None and observed[-1] is not row


async def test_no_outcome_changes_after_the_observer_saw_it_resolve(traced: Any) -> None:
    clock = FakeClock()
    keeper = Keeper()
    board = Breakers(BreakerSettings(threshold=1, cooldown=10.0), clock=clock)
    flaky = Flaky("flaky")
    sources = [*_sources(flaky), Text("told", "the user said this")]
    options: dict[str, Any] = dict(timeout=0.3, budget=65, on_outcome=keeper, dedupe=True,
                                   breaker=board, history=["earlier:\n\nthe user said this"],
                                   max_chars=200)
    first = await resolve_context(sources, "q", **options)
    by_name = {o.name: o for o in first.outcomes}
    assert by_name["told"].reason == "duplicate of message 0"
    assert by_name["dup"].reason == "duplicate of alpha"
    assert by_name["big"].status is Status.SKIPPED_SIZE  # over max_chars=200
    assert {o.status for o in first.outcomes} >= {
        Status.FIRED, Status.SKIPPED_BUDGET, Status.SKIPPED, Status.FAILED, Status.TIMEOUT,
        Status.EMPTY, Status.SKIPPED_SIZE}
    assert first.fired == ["alpha", "capped", "mid", "vol"]  # no caps on this face
    assert first.text.split("\n\n")[-1] == '<context name="vol">\ntick 1\n</context>'
    keeper.assert_untouched()
    second = await resolve_context(sources, "q", previous=first, **options)
    assert second.outcomes[sources.index(flaky)].circuit == "open"
    assert second.prefix_stable is True
    keeper.assert_untouched()
    flaky.down = False
    clock.advance(11.0)
    third = await resolve_context(sources, "q", previous=second, **options)
    row = third.outcomes[sources.index(flaky)]  # the trial answered, then did not fit
    assert (row.circuit, row.status) == ("half_open", Status.SKIPPED_BUDGET)
    assert third.prefix_stable is True
    keeper.assert_untouched()


async def test_a_failed_row_is_made_whole_not_patched() -> None:
    # A non-string answer and a count that fails: each row has the provider's own
    # duration and its degradation reason from the start (the observer saw them).
    class Counter:
        def __call__(self, text: str) -> int:
            if "poison" in text:
                raise ValueError("cannot count")
            return len(text.split())

    keeper = Keeper()
    reg = ContextProviderRegistry(counter=Counter(), on_outcome=keeper)
    reg.register(Text("nonstr", 7, degraded="stale replica"))
    reg.register(Text("poison", "poison pill", degraded="stale replica"))
    report = await reg.gather(None, None)
    for o, before in keeper.seen:
        assert before["status"] is Status.FAILED
        assert before["degradation_reason"] == "stale replica"
        assert before["duration_ms"] >= 0.0
        assert o in report.outcomes
    assert report.degraded == [{"provider_name": "nonstr", "reason": "stale replica"},
                               {"provider_name": "poison", "reason": "stale replica"}]
    assert report.outcomes[1].reason is not None
    assert report.outcomes[1].reason.startswith("token counting failed: ValueError")


# -- build_report: a property over random outcome sets --------------------------------

_STATUSES = [Status.FIRED] * 4 + [Status.EMPTY, Status.FAILED, Status.TIMEOUT,
                                  Status.SKIPPED_SIZE, Status.SKIPPED]


@st.composite
def outcome_sets(draw: st.DrawFn) -> list[Outcome]:
    n = draw(st.integers(0, 10))
    rows = []
    for i in range(n):
        status = draw(st.sampled_from(_STATUSES))
        fired = status is Status.FIRED
        rows.append(Outcome(
            name=draw(st.sampled_from(["a", "b", "c", "d", "a b"])), index=i, status=status,
            text=f"text {i}" if fired else None,
            tokens=draw(st.integers(0, 40)) if fired else 0,
            duration_ms=draw(st.floats(0, 50)),
            reason=None if fired else draw(st.sampled_from([None, "why"])),
            degradation_reason=draw(st.sampled_from([None, "replica"])),
            priority=draw(st.sampled_from([0, 1, 2, 0.5, -1])),
            max_tokens=draw(st.sampled_from([None, None, 0, 5, 20, -1, 7.5])),
            exact=draw(st.booleans()) if fired else True,
            digest=draw(st.sampled_from([None, "0123456789abcdef"])) if fired else None,
            volatile=draw(st.booleans()),
        ))
    return rows


@settings(max_examples=300, deadline=None)
@given(outcome_sets(), st.one_of(st.none(), st.integers(-5, 80), st.floats(0, 80)),
       st.booleans(), st.one_of(st.none(), st.just((("a", "0123456789abcdef"),))))
def test_build_report_leaves_its_inputs_alone_and_the_views_agree(
        outcomes: list[Outcome], budget: Any, digests: bool, previous: Any) -> None:
    given_rows = list(outcomes)
    before = [snapshot(o) for o in outcomes]
    report = build_report(outcomes, budget, previous=previous, digests=digests)

    assert outcomes == given_rows and all(a is b for a, b in zip(outcomes, given_rows, strict=True))
    assert [snapshot(o) for o in outcomes] == before

    # Only admission's decisions (and a kept row's missing digest) make new rows.
    fired = [o for o in outcomes if o.status is Status.FIRED]
    decision = admit([_candidate(o) for o in fired], budget)
    kept = {id(fired[i]) for i in decision.kept}
    for old, new in zip(outcomes, report.outcomes, strict=True):
        if new is old:
            assert old.status is not Status.FIRED or id(old) in kept
            continue
        assert old.status is Status.FIRED
        changed = {k for k, v in snapshot(new).items() if snapshot(old)[k] != v}
        if id(old) in kept:
            assert changed == {"digest"} and digests and old.digest is None
        else:
            assert new.status in (Status.SKIPPED_CAP, Status.SKIPPED_BUDGET)
            assert changed <= {"status", "reason", "digest"} and new.digest is None

    view, resolution = ProviderReport(report), Resolution(report)
    kept_names = [fired[i].name for i in decision.kept]
    assert view.names == resolution.fired == [o.name for o in report.kept] == kept_names
    assert view.used_tokens == resolution.used_tokens == report.used_tokens == decision.used
    assert view.report is report and resolution.report is report
    assert view.skipped == [o.name for o in outcomes if o.status is Status.SKIPPED_SIZE] + [
        fired[i].name for i in decision.skipped]
    assert view.offered_tokens == sum(o.tokens for o in fired)
    assert len(report.digests) == (len(kept_names) if digests else 0)
    if digests and previous is not None:
        assert report.prefix_stable is (report.digests == previous)


def _candidate(o: Outcome) -> Any:
    from lionctx._admission import Candidate

    return Candidate(o.tokens, o.priority, o.max_tokens)


# -- the views ------------------------------------------------------------------------

def _sample() -> Report:
    rows = [Outcome("a", 0, Status.FIRED, "alpha", 2, 1.0),
            Outcome("b", 1, Status.FIRED, "beta " * 30, 30, 1.0, max_tokens=5),
            Outcome("c", 2, Status.FAILED, reason="RuntimeError: x",
                    degradation_reason="replica")]
    return build_report(rows, 100)


def test_views_are_frozen_equal_by_report_and_pickle() -> None:
    report = _sample()
    view, resolution = ProviderReport(report), Resolution(report=report)
    for obj, name in [(view, "blocks"), (view, "budget"), (view, "report"),
                      (resolution, "text"), (resolution, "cache_break")]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(obj, name)
    assert view == ProviderReport(report) and view != ProviderReport()
    assert ProviderReport() == ProviderReport(Report()) and ProviderReport().skipped == []
    for obj in (view, resolution):
        copy = pickle.loads(pickle.dumps(obj))
        assert copy == obj and copy.report == report and type(copy) is type(obj)
        with pytest.raises(TypeError):
            hash(obj)
    assert view.blocks == ["alpha"] and view.skipped == ["b"] and view.failed == ["c"]
    assert view.degraded == [{"provider_name": "c", "reason": "replica"}]
    assert resolution.text == str(resolution) == report.render()
    assert report.render("lionagi", system="S", guidance="G") == "SalphaG"
    assert "blocks=['alpha']" in repr(view) and "text=" in repr(resolution)


def test_view_constructors_refuse_a_non_report_naming_it() -> None:
    for build, shown in [(lambda: ProviderReport(5), "got 5"),  # type: ignore[arg-type]
                         (lambda: ProviderReport(report="x"), "got 'x'"),  # type: ignore[arg-type]
                         (lambda: Resolution(5), "got 5"),  # type: ignore[arg-type]
                         (lambda: Resolution(report=None), "got None")]:  # type: ignore[arg-type]
        with pytest.raises(InvalidType, match=f"takes a Report, {shown}"):
            build()


@settings(max_examples=200, deadline=None)
@given(outcome_sets(), st.one_of(st.none(), st.integers(-5, 80)))
def test_a_views_lists_are_the_callers_copies(outcomes: list[Outcome], budget: Any) -> None:
    # Every field is read from the report: a caller that changes a list it was given
    # changes its own copy, and the view keeps agreeing with its report.
    report = build_report(outcomes, budget)
    view, resolution = ProviderReport(report), Resolution(report)
    lists = ("blocks", "fired", "skipped", "failed", "degraded", "outcomes", "names")
    before = {name: getattr(view, name) for name in lists}
    text, fired = resolution.text, resolution.fired
    for name in lists:
        got = getattr(view, name)
        for row in got:
            if isinstance(row, dict):
                row["provider_name"] = "changed"
        got.append("added by a caller")
        got.reverse()
    view.fired.clear()
    resolution.outcomes.clear()
    resolution.fired.append("x")
    assert {name: getattr(view, name) for name in lists} == before
    assert (resolution.text, resolution.fired) == (text, fired)
    kept = [o for o in report.outcomes if o.status is Status.FIRED]
    assert before["blocks"] == [o.text or "" for o in kept]
    assert before["fired"] == [{"provider_name": o.name, "tokens": o.tokens} for o in kept]
    assert before["names"] == fired == [o.name for o in kept]
    assert before["failed"] == [o.name for o in report.outcomes
                                if o.status in (Status.FAILED, Status.TIMEOUT)]
    assert before["outcomes"] == list(report.outcomes)
    assert view.to_dict(include_text=True)["blocks"] == before["blocks"]


def test_outcome_replace_copies_every_field() -> None:
    values: dict[str, Any] = {f.name: f"v-{f.name}" for f in dataclasses.fields(Outcome)}
    o = Outcome(**values)
    copy = o.replace()
    assert copy == o and copy is not o and snapshot(copy) == values
    other = o.replace(status=Status.SKIPPED, reason="r")
    assert (other.status, other.reason) == (Status.SKIPPED, "r") and snapshot(o) == values
    with pytest.raises(AttributeError):
        o.replace(no_such_field=1)


def test_neither_face_imports_the_other() -> None:
    code = ("import sys, importlib; importlib.import_module(sys.argv[1]); "
            "print(sys.argv[2] in sys.modules)")
    for face, other in [("lionctx.resolve", "lionctx.registry"),
                        ("lionctx.registry", "lionctx.resolve")]:
        out = subprocess.run([sys.executable, "-c", code, face, other], check=True,
                             capture_output=True, text=True).stdout.strip()
        assert out == "False", f"importing {face} imported {other}"


@settings(max_examples=300, deadline=None)
@given(outcome_sets(), st.one_of(st.none(), st.integers(0, 400)), st.booleans(),
       st.sampled_from(["none", "same", "other", "reordered"]))
def test_digests_are_the_kept_blocks_pairs_and_reuse_an_equal_previous(
        outcomes: list[Outcome], budget: Any, all_fired: bool, kind: str) -> None:
    # A report's digests are the (name, digest) of its kept blocks in rendering order.
    # When they equal the previous pass's, the report holds that very tuple (no new
    # pair per block); otherwise a tuple of its own, equal to the pairs.
    from lionctx._render import kept_in_order

    if all_fired:
        outcomes = [o.replace(status=Status.FIRED, text=o.text or "x", max_tokens=None)
                    for o in outcomes]
    first = build_report(outcomes, budget)
    pairs = tuple((o.name, o.digest) for o in kept_in_order(first.outcomes))
    assert first.digests == pairs
    previous: Any = None
    if kind == "same":
        previous = tuple((str(a), str(b)) for a, b in pairs)  # equal, not the same object
    elif kind == "other":
        previous = pairs + (("z", "ffffffffffffffff"),)
    elif kind == "reordered":
        previous = tuple(reversed(pairs))
    report = build_report(outcomes, budget, previous=previous)
    assert report.digests == pairs
    if previous is not None and previous == pairs:
        assert report.digests is previous
        assert report.prefix_stable is True and report.cache_break is None
    elif previous is not None:
        assert report.digests is not previous
        assert report.prefix_stable is False and report.cache_break is not None


async def test_a_steady_registry_keeps_its_digests_until_a_block_changes() -> None:
    class Source:
        def __init__(self, name: str, text: str) -> None:
            self.name, self.text = name, text

        async def provide(self, branch: Any, instruction: Any) -> str:
            return self.text

    sources = [Source(f"s{i}", f"text {i}") for i in range(50)]
    registry = ContextProviderRegistry()
    for s in sources:
        registry.register(s)
    first = (await registry.gather(None, "q")).report
    second = (await registry.gather(None, "q")).report
    assert second.digests == first.digests and second.prefix_stable is True
    sources[7].text = "changed"
    third = (await registry.gather(None, "q")).report
    assert third.digests != second.digests
    assert third.digests[7] == ("s7", digest("changed")) and third.digests[8] == second.digests[8]
    assert third.cache_break == CacheBreak("s7", "changed", 7)


def test_build_report_dedupe_names_the_injected_copy_and_leaves_rows_alone() -> None:
    rows = (Outcome("low", 0, Status.FIRED, "same", tokens=4, priority=0),
            Outcome("other", 1, Status.FIRED, "x", tokens=6, priority=1),
            Outcome("high", 2, Status.FIRED, " same\n", tokens=4, priority=2))
    report = build_report(rows, 9, dedupe=lambda o: (o.text or "").strip())
    low, other, high = report.outcomes
    assert (high.status, low.status, low.reason) == (Status.FIRED, Status.SKIPPED,
                                                     "duplicate of high")
    assert low.digest is None and other.status is Status.SKIPPED_BUDGET
    assert (report.used_tokens, report.offered_tokens) == (4, 10)
    assert rows[0].status is Status.FIRED, "the gathered row is left as it is"
    assert report.skip_order == (1,)
    # all distinct: the same report as without dedupe
    distinct = rows[:2]
    assert build_report(distinct, 99, dedupe=lambda o: o.text).outcomes == \
        build_report(distinct, 99).outcomes

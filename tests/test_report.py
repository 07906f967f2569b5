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


def test_views_are_frozen_equal_by_value_and_pickle() -> None:
    report = _sample()
    view, resolution = ProviderReport(report), Resolution(report)
    for obj, name in [(view, "blocks"), (view, "budget"), (view, "report"),
                      (resolution, "text"), (resolution, "cache_break")]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)
    assert view == ProviderReport(report) and view != ProviderReport()
    assert ProviderReport() == ProviderReport() and ProviderReport().skipped == []
    assert pickle.loads(pickle.dumps(view)) == view
    assert pickle.loads(pickle.dumps(resolution)) == resolution
    assert view.blocks == ["alpha"] and view.skipped == ["b"] and view.failed == ["c"]
    assert view.degraded == [{"provider_name": "c", "reason": "replica"}]
    assert resolution.text == str(resolution) == report.render()
    assert report.render("lionagi", system="S", guidance="G") == "SalphaG"
    assert "blocks=['alpha']" in repr(view) and "text=" in repr(resolution)
    with pytest.raises(TypeError):
        hash(view)


def test_setting_a_view_field_through_object_setattr_swaps_the_report() -> None:
    # What code written for the frozen dataclasses did (agentium's Agent sets its
    # per-session cache break so): the old report stays as it was.
    report = _sample()
    resolution = Resolution(report)
    brk = CacheBreak("a", "changed", 0)
    object.__setattr__(resolution, "cache_break", brk)
    object.__setattr__(resolution, "prefix_stable", False)
    assert resolution.cache_break is brk and resolution.prefix_stable is False
    assert resolution.report.cache_break is brk and resolution.report is not report
    assert report.cache_break is None and report.prefix_stable is None
    assert resolution.to_dict()["cache_break"] == brk.to_dict()


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


# -- the views' dataclass face: the old constructors and dataclasses.* ----------------
# The frozen dataclasses the views were (as of 0e04565), written out to compare with.

@dataclasses.dataclass(frozen=True)
class OldProviderReport:
    blocks: list[str] = dataclasses.field(default_factory=list)
    fired: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)
    degraded: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    outcomes: list[Outcome] = dataclasses.field(default_factory=list)
    budget: Any = None
    used_tokens: int = 0
    offered_tokens: int = 0
    duration_ms: float = 0.0
    tokenizer_load_ms: float = 0.0
    cache_break: Any = None
    prefix_stable: bool | None = None


@dataclasses.dataclass(frozen=True)
class OldResolution:
    text: str
    outcomes: list[Outcome] = dataclasses.field(default_factory=list)
    budget: Any = None
    used_tokens: int = 0
    duration_ms: float = 0.0
    tokenizer_load_ms: float = 0.0
    digests: tuple[tuple[str, str], ...] = ()
    cache_break: Any = None
    prefix_stable: bool | None = None


def _shape(cls: Any) -> list[tuple[Any, ...]]:
    return [(f.name, f.default, f.default_factory, f.init, f.repr, f.compare)
            for f in dataclasses.fields(cls)]


def _old_args() -> tuple[Any, ...]:
    rows = [Outcome("a", 0, Status.FIRED, "alpha", 2, 1.0, digest="d1"),
            Outcome("b", 1, Status.SKIPPED_BUDGET, "beta", 9, 1.0, reason="over"),
            Outcome("c", 2, Status.FAILED, reason="boom", degradation_reason="replica")]
    return (["alpha"], [{"provider_name": "a", "tokens": 2}], ["b"], ["c"],
            [{"provider_name": "c", "reason": "replica"}], rows, 10, 2, 11, 4.5, 1.5,
            CacheBreak("a", "changed", 0), False)


def test_provider_report_takes_the_old_fields_positional_and_keyword() -> None:
    args = _old_args()
    names = [f.name for f in dataclasses.fields(OldProviderReport)]
    by_position = ProviderReport(*args)
    by_name = ProviderReport(**dict(zip(names, args, strict=True)))
    assert by_position == by_name
    old = OldProviderReport(*args)
    for name, value in zip(names, args, strict=True):
        assert getattr(by_position, name) is value  # the caller's objects, as before
    assert repr(by_position) == repr(old).replace("OldProviderReport", "ProviderReport")
    # .report is a Report of what was given, and reads back as the same view.
    report = by_position.report
    assert isinstance(report, Report) and report.outcomes == tuple(args[5])
    assert (report.budget, report.used_tokens, report.offered_tokens, report.duration_ms,
            report.tokenizer_load_ms, report.cache_break, report.prefix_stable) == args[6:]
    assert report.skip_order == (1,) and report.digests == (("a", "d1"),)
    assert report.render("lionagi") == "alpha" and report.kept == [args[5][0]]
    assert ProviderReport(report=report) == by_position == ProviderReport(report)


def test_lionagi_builds_a_report_of_skipped_names_only() -> None:
    # LionAGI's systemless branch: ProviderReport(skipped=[...]), no outcome rows.
    view = ProviderReport(skipped=["a", "b"])
    assert view.skipped == ["a", "b"] and view.blocks == view.fired == view.failed == []
    assert view.outcomes == [] and view.budget is None and view.used_tokens == 0
    assert view.report == Report() and view != ProviderReport()
    assert view.to_dict()["skipped"] == ["a", "b"]
    assert dataclasses.asdict(view) == dataclasses.asdict(OldProviderReport(skipped=["a", "b"]))
    assert ProviderReport() == ProviderReport(None) == ProviderReport(report=Report())


def test_resolution_takes_the_old_fields_positional_and_keyword() -> None:
    rows = [Outcome("a", 0, Status.FIRED, '<context name="a">\nalpha\n</context>', 7, 1.0),
            Outcome("b", 1, Status.SKIPPED_BUDGET, "<context>", 9, 1.0, reason="over")]
    args: tuple[Any, ...] = ('<context name="a">\nalpha\n</context>', rows, 8, 7, 3.0, 0.5,
            (("a", "d1"),), None, True)
    names = [f.name for f in dataclasses.fields(OldResolution)]
    by_position, by_name = Resolution(*args), Resolution(**dict(zip(names, args, strict=True)))
    assert by_position == by_name and str(by_position) == args[0]
    for name, value in zip(names, args, strict=True):
        assert getattr(by_position, name) == value
    assert by_position.outcomes is rows and by_position.fired == ["a"]
    assert repr(by_position) == repr(OldResolution(*args)).replace("OldResolution", "Resolution")
    report = by_position.report
    assert report.outcomes == tuple(rows) and report.framed and report.render() == args[0]
    assert (report.budget, report.used_tokens, report.offered_tokens) == (8, 7, 16)
    assert report.digests == args[6] and report.prefix_stable is True
    assert Resolution(report=report) == by_position == Resolution(report)
    assert Resolution("just text").text == "just text" and Resolution("x").outcomes == []


def test_views_are_dataclasses_to_the_dataclasses_module() -> None:
    view, resolution = ProviderReport(*_old_args()), Resolution(report=_sample())
    for obj, old in [(view, OldProviderReport), (resolution, OldResolution)]:
        assert dataclasses.is_dataclass(obj) and dataclasses.is_dataclass(type(obj))
        assert _shape(obj) == _shape(type(obj)) == _shape(old)
        assert type(obj).__dataclass_params__.frozen  # type: ignore[attr-defined]
        values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        assert dataclasses.asdict(obj) == dataclasses.asdict(old(**values))
        assert dataclasses.astuple(obj) == dataclasses.astuple(old(**values))
        assert dataclasses.replace(obj) == obj
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.budget = 3  # type: ignore[misc]
    assert dataclasses.asdict(view)["outcomes"][2]["reason"] == "boom"  # rows recursed into
    # __match_args__ is set when the view class is made, which mypy does not see
    assert type(view).__match_args__ == tuple(f.name for f in dataclasses.fields(view))  # type: ignore[attr-defined]
    match view:
        case ProviderReport(blocks, fired):  # type: ignore[misc]
            assert (blocks, fired) == (view.blocks, view.fired)

    cheaper = dataclasses.replace(view, budget=5, skipped=["b", "zz"])
    assert cheaper.budget == cheaper.report.budget == 5 and view.budget == 10
    assert cheaper.skipped == ["b", "zz"] and cheaper.report.skip_order == (1,)
    assert cheaper.blocks is view.blocks  # replace passes the old values on, as before
    retold = dataclasses.replace(resolution, text="other", prefix_stable=False)
    assert retold.text == "other" and retold.prefix_stable is retold.report.prefix_stable is False
    assert retold.outcomes == resolution.outcomes and resolution.text != "other"
    with pytest.raises(TypeError, match="not both"):
        dataclasses.replace(view, report=Report())


def test_views_built_from_fields_pickle_compare_and_stay_frozen() -> None:
    import weakref

    view, resolution = ProviderReport(*_old_args()), Resolution("t", [], 3)
    for obj in (view, resolution):
        copy = pickle.loads(pickle.dumps(obj))
        assert copy == obj and copy.report == obj.report and weakref.ref(obj)() is obj
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.outcomes = []  # type: ignore[misc]
        with pytest.raises(TypeError):
            hash(obj)
    assert resolution != Resolution("t", [], 4) and resolution != Resolution("u", [], 3)


def test_view_constructors_refuse_bad_input_naming_it() -> None:
    report = _sample()
    with pytest.raises(TypeError, match="not both; got report= and blocks"):
        ProviderReport(blocks=[], report=report)
    with pytest.raises(TypeError, match="got report= and fired"):
        ProviderReport(report, [])  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="got report= and budget"):
        Resolution(report=report, budget=3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="takes a Report, got 'x'"):
        ProviderReport(report="x")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="takes a Report, got 5"):
        Resolution(report=5)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"takes Outcome rows, got \{'name': 'a'\}"):
        ProviderReport(outcomes=[{"name": "a"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="needs its text"):
        Resolution()  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="takes a str, got 3"):
        Resolution(3)  # type: ignore[call-overload]


@settings(max_examples=200, deadline=None)
@given(outcome_sets(), st.one_of(st.none(), st.integers(-5, 80), st.floats(0, 80)),
       st.one_of(st.none(), st.just((("a", "0123456789abcdef"),))))
def test_views_round_trip_through_their_fields_and_the_report(
        outcomes: list[Outcome], budget: Any, previous: Any) -> None:
    report = build_report(outcomes, budget, previous=previous, digests=True)
    view = ProviderReport(report=report)
    again = ProviderReport(**{f.name: getattr(view, f.name) for f in dataclasses.fields(view)})
    assert again == view == dataclasses.replace(view) == ProviderReport(report=again.report)
    assert again.report.outcomes == report.outcomes and again.report.digests == report.digests
    unique = len({o.name for o in outcomes}) == len(outcomes)
    if unique:  # names pick the skipped rows back out
        assert again.report == report
    # agentium's face keeps framed text (as resolve_context does); no name matters here
    framed = build_report([o.replace(text=f"<context>{o.text}</context>")
                           if o.text is not None else o for o in outcomes],
                          budget, previous=previous, framed=True)
    resolution = Resolution(report=framed)
    back = Resolution(*(getattr(resolution, f.name) for f in dataclasses.fields(resolution)))
    assert back == resolution == dataclasses.replace(resolution)
    assert back.report == framed and Resolution(report=back.report) == resolution
    assert ProviderReport(report=back.report).skipped == ProviderReport(report=framed).skipped


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


async def test_a_steady_registry_keeps_one_digest_tuple_until_a_block_changes() -> None:
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
    assert second.digests is first.digests and second.prefix_stable is True
    sources[7].text = "changed"
    third = (await registry.gather(None, "q")).report
    assert third.digests is not second.digests
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

"""Exceptions and objects built to blow up the text made of them: a 2 MB message from
each of 50 providers, a ``__str__`` that returns a str subclass whose ``__format__``
raises, one that recurses, a class whose ``__name__`` lies. Each costs its row a
bounded reason, never the turn, and nothing written (reasons, report JSON, log
lines) grows with what the provider said."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, SourceUnavailable, Status, resolve_context
from lionctx._safe_text import (
    NAME_LIMIT,
    TEXT_LIMIT,
    TRACEBACK_LIMIT,
    error_text,
    safe_repr,
    safe_text,
)
from lionctx.engines import ContextEngine
from lionctx.engines._session import EngineSession
from lionctx.models._openai_chat import model_error
from lionctx.providers import ContextSource

pytestmark = pytest.mark.anyio

HUGE = 2_000_000
MESSAGE = "m" * HUGE  # one string, shared: the test itself stays small
# A reason is a short prefix, a bounded class name and a bounded message.
REASON_BOUND = TEXT_LIMIT + NAME_LIMIT + 64


# -- hostile pieces -------------------------------------------------------------------

class Liar(str):
    """A str whose every method a formatter might call raises."""

    def __format__(self, spec):
        raise RuntimeError("no format")

    def __str__(self):
        raise RuntimeError("no str")

    def __repr__(self):
        raise RuntimeError("no repr")

    def __len__(self):
        raise RuntimeError("no len")

    def __getitem__(self, item):
        raise RuntimeError("no getitem")

    def __add__(self, other):
        raise RuntimeError("no add")

    def __mod__(self, other):
        raise RuntimeError("no mod")


class LyingError(Exception):
    def __str__(self):
        return Liar("the message " * 10)


class HugeLyingError(Exception):
    def __str__(self):
        return Liar(MESSAGE)


class RecursiveError(Exception):
    def __str__(self):
        return str(self)

    def __repr__(self):
        return repr(self)


class Unprintable(Exception):
    def __str__(self):
        raise ValueError("no str")

    def __repr__(self):
        raise ValueError("no repr")


NamedByLiar = type("NamedByLiar", (Exception,), {})
NamedByLiar.__name__ = Liar("Liar")
LongName = type("L" * 100_000, (Exception,), {})


class Raising:
    """A provider of both shapes that raises ``exc``."""

    def __init__(self, name: str, exc: BaseException):
        self.name, self.exc = name, exc

    async def provide(self, branch, instruction):
        raise self.exc

    async def fetch(self, query, ctx):
        raise self.exc


class Returning:
    def __init__(self, name: str, value: object):
        self.name, self.value = name, value

    async def provide(self, branch, instruction):
        return self.value

    async def fetch(self, query, ctx):
        return self.value


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    """Everything lionctx logs, formatted as a plain StreamHandler writes it."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger("lionctx")
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield out
    root.removeHandler(handler)
    root.setLevel(old)


def _assert_bounded_row(row, kind: str) -> None:
    assert row.status is Status.FAILED
    assert type(row.reason) is str and len(row.reason) <= REASON_BOUND, len(row.reason)
    assert type(row.error) is str and len(row.error) <= TEXT_LIMIT
    assert row.reason.startswith(f"{kind}: ")


# -- 50 providers, 2 MB each ----------------------------------------------------------

@pytest.mark.parametrize("concurrent", [False, True])
async def test_fifty_huge_messages_cost_fifty_bounded_rows(concurrent, log_text):
    reg = ContextProviderRegistry(concurrent=concurrent)
    for i in range(50):
        exc = SourceUnavailable(MESSAGE) if i % 2 else ValueError(MESSAGE)
        reg.register(Raising(f"p{i}", exc))
    reg.register(Returning("ok", "still here"))
    report = await reg.gather(None, None)
    assert report.blocks == ["still here"]
    rows = report.report.outcomes
    for i, row in enumerate(rows[:50]):
        _assert_bounded_row(row, "SourceUnavailable" if i % 2 else "ValueError")
        assert row.reason.endswith(f"... [{HUGE:,} chars]")  # the length is noted
    dumped = json.dumps(report.report.to_dict())
    assert len(dumped) < 50 * (REASON_BOUND + TEXT_LIMIT + 500)
    # Tracebacks included (the ValueErrors), each record holds a bounded text.
    written = log_text.getvalue()
    assert "Traceback" in written and "ValueError: mmm" in written
    assert len(written) < 50 * (TRACEBACK_LIMIT + 500)


async def test_fifty_huge_messages_on_the_agentium_face(log_text):
    providers = [Raising(f"p{i}", RuntimeError(MESSAGE)) for i in range(50)]
    out = await resolve_context([*providers, Returning("ok", "fine")], "q", breaker=False)
    rows = out.report.outcomes
    assert rows[-1].status is Status.FIRED
    for row in rows[:50]:
        _assert_bounded_row(row, "RuntimeError")
    assert len(json.dumps(out.report.to_dict())) < 50 * (REASON_BOUND + TEXT_LIMIT + 500)
    assert len(log_text.getvalue()) < 50 * (TRACEBACK_LIMIT + 500)


# -- hostile __str__ / __format__ / __repr__ / __name__ -------------------------------

HOSTILE = [
    pytest.param(LyingError(), "LyingError", id="str-subclass-raising-format"),
    pytest.param(HugeLyingError(), "HugeLyingError", id="huge-str-subclass"),
    pytest.param(RecursiveError(), "RecursiveError", id="recursive-str"),
    pytest.param(Unprintable(), "Unprintable", id="str-and-repr-raise"),
    pytest.param(NamedByLiar("x"), "Liar", id="class-name-is-a-liar"),
    pytest.param(LongName("x"), None, id="class-name-100k-chars"),
]


@pytest.mark.parametrize("exc,kind", HOSTILE)
@pytest.mark.parametrize("face", ["lionagi", "agentium"])
async def test_a_hostile_exception_costs_a_row_not_the_turn(exc, kind, face, caplog):
    caplog.set_level(logging.WARNING, logger="lionctx")  # pytest's handler raises on errors
    providers = [Raising("bad", exc), Returning("ok", "fine")]
    if face == "lionagi":
        reg = ContextProviderRegistry(concurrent=True)
        for p in providers:
            reg.register(p)
        rows = (await reg.gather(None, None)).report.outcomes
    else:
        rows = (await resolve_context(providers, "q", breaker=False)).report.outcomes
    bad, ok = rows
    assert ok.status is Status.FIRED
    assert bad.status is Status.FAILED
    assert type(bad.reason) is str and len(bad.reason) <= REASON_BOUND
    assert type(bad.error_type) is str and len(bad.error_type) <= NAME_LIMIT
    if kind is not None:
        assert bad.error_type == kind
    json.dumps(bad.to_dict())
    assert len(caplog.text) < 2 * TRACEBACK_LIMIT


async def test_the_lying_message_is_read_without_its_methods():
    reg = ContextProviderRegistry()
    reg.register(Raising("bad", LyingError()))
    row = (await reg.gather(None, None)).report.outcomes[0]
    assert row.reason == "LyingError: " + "the message " * 10


@pytest.mark.parametrize("value", [
    pytest.param(NamedByLiar("x"), id="object-whose-class-name-lies"),
    pytest.param(LongName("x"), id="object-with-a-100k-class-name"),
])
async def test_a_hostile_returned_object_costs_a_row(value, caplog):
    caplog.set_level(logging.WARNING, logger="lionctx")
    reg = ContextProviderRegistry()
    reg.register(Returning("bad", value))
    reg.register(Returning("ok", "fine"))
    report = await reg.gather(None, None)
    bad = report.report.outcomes[0]
    assert report.blocks == ["fine"]
    assert bad.status is Status.FAILED and len(bad.reason) <= REASON_BOUND


class ClaimsToBeStr:
    """Not a str, but says so through ``__class__``."""

    __class__ = property(lambda self: str)  # type: ignore[assignment]

    def __len__(self):
        raise RuntimeError("no len")


@pytest.mark.parametrize("reason", [
    pytest.param(Liar("partly stale"), id="str-subclass"),
    pytest.param(ClaimsToBeStr(), id="claims-to-be-a-str"),
    pytest.param("stale " * 1_000_000, id="six-million-chars"),
])
async def test_a_hostile_degradation_reason_is_bounded(reason, caplog):
    caplog.set_level(logging.WARNING, logger="lionctx")

    class Degraded(Returning):
        degradation_reason = reason

    reg = ContextProviderRegistry()
    reg.register(Degraded("d", "text"))
    report = await reg.gather(None, None)
    row = report.report.outcomes[0]
    assert row.status is Status.FIRED
    if type(reason) is ClaimsToBeStr:
        assert row.degradation_reason is None  # not a str: no reason
    else:
        assert type(row.degradation_reason) is str
        assert len(row.degradation_reason) <= TEXT_LIMIT
        assert str.startswith(reason, row.degradation_reason[:12])  # its own characters
    assert len(caplog.text) < 2 * TEXT_LIMIT


async def test_a_source_unavailable_subclass_message_is_bounded_in_last_error():
    class Source(ContextSource):
        name = "src"

        async def retrieve(self, query, ctx):
            raise SourceUnavailable(MESSAGE)

    src = Source()
    assert await src.fetch("q", None) is None
    assert len(src.last_error) <= TEXT_LIMIT and src.last_error.endswith(f"[{HUGE:,} chars]")


# -- the same text, from another side: engines, tools, models, writeback -------------------

class CompressingEngine(ContextEngine):
    name = "e" * 50_000  # a label is bounded too

    def update_from_response(self, usage):
        pass

    def should_compress(self, prompt_tokens=None):
        return True

    def compress(self, messages, current_tokens=None, focus_topic=None):
        return [{"role": "r" * HUGE, "content": "x"}]

    def handle_tool_call(self, name, args, **kwargs):
        raise RuntimeError(MESSAGE)


def test_an_engine_returning_a_huge_role_logs_a_bounded_line(caplog):
    caplog.set_level(logging.WARNING, logger="lionctx")
    history = [{"role": "user", "content": "hi"}]
    assert EngineSession(CompressingEngine()).compact(history, 10) is None
    assert "history kept" in caplog.text
    assert len(caplog.text) < 4 * TEXT_LIMIT


def test_an_engine_tool_with_a_huge_name_answers_a_bounded_error(caplog):
    caplog.set_level(logging.WARNING, logger="lionctx")
    out = EngineSession(CompressingEngine()).tool_result("t" * HUGE, {})
    assert json.loads(out)["error"].endswith("failed: RuntimeError")
    assert len(out) < 2 * NAME_LIMIT
    assert len(caplog.text) < 4 * TEXT_LIMIT


def test_a_model_error_from_a_lying_exception_is_bounded():
    err = model_error(HugeLyingError(), where="http://127.0.0.1:1/v1", timeout=1.0,
                      model="m", scrub=lambda s: s)
    assert "HugeLyingError" in str(err) and len(str(err)) < 2 * TEXT_LIMIT


@pytest.mark.parametrize("exc", [NamedByLiar("x"), HugeLyingError(), ValueError(MESSAGE)],
                         ids=["class-name-liar", "huge-liar", "huge"])
async def test_a_tool_raising_a_hostile_exception_tells_the_model_a_bounded_error(exc, caplog):
    from lionctx.models import as_tool, run_tool_call

    caplog.set_level(logging.WARNING, logger="lionctx")

    def lookup(order_id: str) -> str:
        raise exc

    call = {"id": "c1", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"order_id": "A1"})}}
    resp, text = await run_tool_call(as_tool(lookup), call)
    assert resp is not None and resp.error is not None
    assert type(text) is str and len(text) <= REASON_BOUND + 100
    assert len(caplog.text) < 2 * TRACEBACK_LIMIT


async def test_a_writeback_hook_raising_a_huge_message_logs_a_bounded_traceback(log_text):
    class Writes(Returning):
        async def writeback(self, branch, responses):
            raise ValueError(MESSAGE)

    reg = ContextProviderRegistry()
    reg.register(Writes("w", "x"))
    await reg.gather_writeback(None, [])
    assert reg.stats["writeback_failed"] == 1
    written = log_text.getvalue()
    assert "writeback raised" in written and "ValueError: mmm" in written
    assert len(written) <= TRACEBACK_LIMIT + 500


def test_a_chained_cause_is_named_bounded_and_stops():
    try:
        try:
            raise KeyError("k" * HUGE)
        except KeyError as inner:
            raise LyingError() from inner
    except LyingError as exc:
        from lionctx._safe_text import traceback_text

        text = traceback_text(exc)
    assert "KeyError" in text and "LyingError: the message" in text
    assert len(text) <= TRACEBACK_LIMIT


# -- the bound, as a property ---------------------------------------------------------

def _hostile(kind: str, payload: str):
    if kind == "plain":
        return payload
    if kind == "liar":
        return Liar(payload)
    if kind == "exc":
        return ValueError(payload, payload)
    if kind == "exc-liar":
        return type("E", (Exception,), {"__str__": lambda self: Liar(payload)})()
    if kind == "not-a-str":
        return type("N", (), {"__str__": lambda self: 42, "__repr__": lambda self: payload})()
    if kind == "class-liar":  # claims to be a str
        return type("C", (), {"__class__": property(lambda self: str),
                              "__len__": lambda self: 1 // 0, "__str__": lambda self: payload})()
    if kind == "raises":
        return Unprintable()
    if kind == "recursive":
        return RecursiveError(payload)
    return object()


KINDS = ["plain", "liar", "exc", "exc-liar", "not-a-str", "class-liar", "raises", "recursive",
         "object"]


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS),
       payload=st.text(max_size=50).map(lambda s: s * 100),
       limit=st.integers(min_value=32, max_value=3000))
def test_safe_text_of_anything_is_a_plain_str_within_the_bound(kind, payload, limit):
    obj = _hostile(kind, payload)
    for text in (safe_text(obj, limit), safe_repr(obj, limit), error_text(obj, limit)[1]):
        assert type(text) is str
        assert len(text) <= limit
        text.encode("utf-8")  # lone surrogates replaced
    name, _ = error_text(obj, limit)
    assert type(name) is str and len(name) <= NAME_LIMIT


@given(size=st.integers(min_value=0, max_value=20_000), limit=st.integers(32, 2000))
def test_a_cut_text_keeps_its_head_and_notes_its_length(size, limit):
    text = safe_text("ab" * size, limit)
    if 2 * size <= limit:
        assert text == "ab" * size
    else:
        note = re.search(r"\.\.\. \[([0-9,]+) chars\]$", text)
        assert note and int(note.group(1).replace(",", "")) == 2 * size
        assert ("ab" * size).startswith(text[:note.start()])

"""Terminal output: the report table, colour rules, the live status line."""

from __future__ import annotations

import io
import json
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import Outcome, Status
from lionctx.cli._terminal import (
    LiveStatus,
    Style,
    format_table,
    json_safe,
    summary_line,
    visible,
    want_color,
)


def sample() -> list[Outcome]:
    return [
        Outcome("notes", 0, Status.FIRED, "t", 120, 3.25, priority=2, max_tokens=400),
        Outcome("status", 1, Status.TIMEOUT, duration_ms=500.0,
                reason="timed out after 0.5s"),
        Outcome("feed", 2, Status.FAILED, error_type="SourceUnavailable",
                error="HTTP 500 from http://127.0.0.1:9/feed",
                reason="SourceUnavailable: HTTP 500 from http://127.0.0.1:9/feed"),
        Outcome("old", 3, Status.SKIPPED_BUDGET, "t", 90, 1.0,
                reason="90 tokens did not fit the 10 left of budget 130", cached=True),
    ]


def test_table_has_a_row_per_provider_with_status_tokens_and_reason():
    lines = format_table(sample(), Style(False), kinds=["fs", "http", "http", "fs"]).splitlines()
    assert lines[0].split() == ["provider", "source", "status", "tokens", "ms", "priority",
                                "cap", "reason"]
    assert lines[1].split() == ["notes", "fs", "fired", "120", "3.2", "2", "400"]
    assert lines[2].split()[:5] == ["status", "http", "timeout", "-", "500.0"]
    assert lines[2].endswith("timed out after 0.5s")
    assert lines[3].split()[:4] == ["feed", "http", "failed", "-"]
    assert lines[3].endswith("  HTTP 500 from http://127.0.0.1:9/feed")  # no class name
    assert lines[4].endswith("did not fit the 10 left of budget 130; cached")
    # columns line up: every status starts where the header's does
    col = lines[0].index("status")
    assert all(line[col:].split()[0] in {s.value for s in Status} for line in lines[1:])


def test_reason_column_for_other_failures_and_partial_answers():
    raised = Outcome("db", 0, Status.FAILED, error_type="RuntimeError", error="db down",
                     reason="RuntimeError: db down")
    half = Outcome("index", 1, Status.EMPTY, degradation_reason="2 shards offline")
    part = Outcome("notes", 2, Status.FIRED, "t", 5, degradation_reason="skipped 1 file(s)")
    lines = format_table([raised, half, part], Style(False)).splitlines()
    assert lines[1].endswith("RuntimeError: db down")  # a raise keeps its type
    assert lines[2].endswith("2 shards offline")
    assert lines[3].endswith("degraded: skipped 1 file(s)")


def test_table_without_priority_columns_for_the_agentium_face():
    header = format_table(sample(), Style(False), show_priority=False).splitlines()[0]
    assert header.split() == ["provider", "status", "tokens", "ms", "reason"]


@given(st.lists(st.tuples(st.text(min_size=1, max_size=12).filter(lambda s: s.strip() == s
                                                                   and s.isprintable()),
                          st.sampled_from(list(Status)), st.integers(0, 10**6)),
                max_size=10))
def test_one_line_per_outcome_and_no_colour_codes_when_off(items):
    outcomes = [Outcome(n, i, s, tokens=t) for i, (n, s, t) in enumerate(items)]
    text = format_table(outcomes, Style(False))
    assert len(text.splitlines()) == 1 + len(outcomes)
    assert "\x1b" not in text


def test_colour_marks_status_only_when_enabled():
    on = format_table(sample(), Style(True))
    assert "\x1b[31;1mtimeout\x1b[0m" in on and "\x1b[32mfired\x1b[0m" in on


def test_summary_line_counts_statuses_and_budget():
    line = summary_line(sample(), 130, 120, 512.4, offered=210)
    assert line == ("budget: 120 of 130 tokens used (providers offered 210) | 1 fired, "
                    "1 failed, 1 timeout, 1 skipped_budget | 512 ms")
    assert summary_line([], None, 0, 0).startswith("budget: none set, 0 tokens used")


def test_want_color_follows_the_terminal_and_no_color(monkeypatch):
    pty = pytest.importorskip("pty")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w") as tty:
            assert want_color("auto", tty) is True
            monkeypatch.setenv("NO_COLOR", "1")
            assert want_color("auto", tty) is False
            assert want_color("always", tty) is True
            monkeypatch.setenv("NO_COLOR", "")  # empty means unset
            assert want_color("auto", tty) is True
            monkeypatch.setenv("TERM", "dumb")
            assert want_color("auto", tty) is False
    finally:
        os.close(master)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert want_color("auto", io.StringIO()) is False
    assert want_color("never", io.StringIO()) is False


def test_live_status_stays_silent_off_a_terminal():
    stream = io.StringIO()
    live = LiveStatus(["a", "b"], stream, delay=0)
    assert live.enabled is False
    live.on_outcome(Outcome("a", 0, Status.FIRED, "x", 1))
    live.clear()
    assert stream.getvalue() == ""


def test_live_status_lists_done_and_waiting_then_erases_itself():
    stream = io.StringIO()
    live = LiveStatus(["notes", "slow"], stream, enabled=True, delay=0)
    live.start()
    live.on_outcome(Outcome("notes", 0, Status.FIRED, "x", 1))
    drawn = stream.getvalue()
    assert re.fullmatch(r"\r\x1b\[2Kresolving 1/2 \(\d+\.\ds\) \| waiting for slow \| notes ok",
                        drawn)
    live.on_outcome(Outcome("slow", 1, Status.TIMEOUT))
    assert stream.getvalue()[len(drawn):].endswith(") | notes ok, slow timeout")
    live.clear()
    assert stream.getvalue().endswith("\r\x1b[2K")
    before = stream.getvalue()
    live.clear()  # nothing drawn since: nothing to erase
    assert stream.getvalue() == before


def test_live_status_waits_for_its_delay_before_drawing():
    stream = io.StringIO()
    live = LiveStatus(["a"], stream, enabled=True, delay=3600)
    live.start()
    live.on_outcome(Outcome("a", 0, Status.FIRED, "x", 1))
    live.clear()
    assert stream.getvalue() == ""


# -- control and bidi characters are shown, never acted on ---------------------------

UNSAFE = ([chr(c) for c in range(0x20) if chr(c) not in "\n\t\r"] + ["\x7f"]
          + [chr(c) for c in range(0x80, 0xA0)]
          + [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)])


def unspell(text: str) -> str:
    """Undo visible() for text that had no backslashes of its own."""
    return re.sub(r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})",
                  lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


def test_visible_spells_out_terminal_sequences_and_bidi_overrides():
    assert visible("\x1b]0;title\x07\x1b[2J") == "\\x1b]0;title\\x07\\x1b[2J"
    assert visible("pay \u202eusd.exe") == "pay \\u202eusd.exe"
    assert visible("\u2066x\u2069 \x9b2J \x7f") == "\\u2066x\\u2069 \\x9b2J \\x7f"
    assert visible("line 1\r\nline\t2\n") == "line 1\r\nline\t2\n"  # line ends stay
    assert visible("100%\roverwritten") == "100%\\x0doverwritten"  # a lone \r does not
    assert visible("a\nb\tc\r\n", multiline=False) == "a\\x0ab\\x09c\\x0d\\x0a"
    assert visible("C:\\path é ünïcode 😀") == "C:\\path é ünïcode 😀"


@given(st.text(alphabet=st.sampled_from(UNSAFE + ["\n", "\t", "\r", "a", "é", "\\", "\u200f"])))
def test_visible_leaves_nothing_a_terminal_acts_on(text):
    shown = visible(text)
    assert not any(c in shown for c in UNSAFE)
    assert "\r" not in shown.replace("\r\n", "")
    cell = visible(text, multiline=False)
    assert not any(c in cell for c in UNSAFE + ["\n", "\t", "\r"])


@given(st.text().filter(lambda t: "\\" not in t))
def test_visible_loses_nothing(text):
    assert unspell(visible(text)) == text
    assert unspell(visible(text, multiline=False)) == text


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(), inner, max_size=3), max_leaves=8))
def test_json_safe_round_trips_and_leaves_no_unsafe_character(value):
    text = json_safe(json.dumps(value, ensure_ascii=False, indent=2))
    assert json.loads(text) == value
    assert not any(c in text for c in UNSAFE)


def test_table_and_live_line_spell_out_names_and_reasons():
    evil = "x\x1b]0;pwned\x07\u202e"
    outcomes = [Outcome(evil, 0, Status.FAILED, reason=f"boom {evil}\nsecond line",
                        error_type="ValueError", error="boom")]
    table = format_table(outcomes, Style(False), kinds=["http\x1b[2J"])
    assert "\x1b" not in table and "\x07" not in table and "\u202e" not in table
    assert "x\\x1b]0;pwned\\x07\\u202e" in table
    assert "http\\x1b[2J" in table
    assert len(table.splitlines()) == 2  # the reason's line break stays in its cell
    stream = io.StringIO()
    live = LiveStatus([evil, "b\x1b[2J"], stream, enabled=True, delay=0)
    live.start()
    live.on_outcome(Outcome(evil, 0, Status.FIRED, "x", 1))
    drawn = stream.getvalue().removeprefix("\r\x1b[2K")
    assert "\x1b" not in drawn and "\u202e" not in drawn
    assert "waiting for b\\x1b[2J | x\\x1b]0;pwned\\x07\\u202e ok" in drawn

"""Terminal output: the report table, colour rules, the live status line."""

from __future__ import annotations

import io
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lionctx.cli.terminal import LiveStatus, Style, format_table, summary_line, want_color
from lionctx.outcome import Outcome, Status


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

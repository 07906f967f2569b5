"""``lionctx demo`` step 4: later turns show the cache-break line and the
deliberately slow source's circuit opening."""

from __future__ import annotations

import re

from ..cli.helpers import run_cli


def test_demo_later_turns_show_cache_lines_and_the_breaker_opening():
    proc = run_cli("demo", "--offline", "--color", "never")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    section = out[out.index("4. Later turns on the same branch"):]
    turns = re.findall(r"^   turn (\d): +(\d+) ms \| (.*?) \| incidents (.*)$", section, re.M)
    assert [t[0] for t in turns] == ["2", "3", "4"]
    assert all(t[2].startswith(("prefix byte-identical", "cache break at block")) for t in turns)
    assert [t[3] for t in turns[:2]] == ["timeout", "timeout"]
    assert turns[2][3].startswith("not called: circuit open until ")
    # the open circuit costs no timeout: turn 4 is far quicker than the 500 ms ones
    assert int(turns[2][1]) < 250 <= int(turns[0][1])

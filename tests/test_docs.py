"""Every Python block in the README and in docs/ runs as written, offline, and prints
what its ``# -> `` comments say; every ``lionctx`` command they show runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXPECT = re.compile(r"#\s?-> ?(.*)$")


def _blocks(kind: str) -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(rf"```{kind}\n(.*?)```", text, re.S):
            line = text.count("\n", 0, match.start()) + 1
            found.append((page.relative_to(ROOT).as_posix(), line, match.group(1)))
    return found


PYTHON = _blocks("python")
COMMANDS = [
    (page, line, text.split("  #")[0].strip())
    for page, line, block in _blocks("bash")
    for text in block.splitlines()
    if text.startswith(".venv/bin/lionctx ")
]


def expected_lines(code: str) -> list[str]:
    """The lines a block promises to print, in order (``# -> text`` comments)."""
    out = []
    for line in code.splitlines():
        match = EXPECT.search(line)
        if match and "#" in line:
            out.append(match.group(1).rstrip())
    return out


def _matches(expected: str, printed: str) -> bool:
    # ``...`` in a promise stands for any text (a clock time, a port).
    pattern = ".*".join(map(re.escape, expected.split("...")))
    return re.fullmatch(pattern, printed.rstrip()) is not None


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}


def test_the_pages_have_examples() -> None:
    assert len(PYTHON) >= 8 and any(page == "README.md" for page, _, _ in PYTHON)


@pytest.mark.parametrize(("page", "line", "code"), PYTHON,
                         ids=[f"{p}:{n}" for p, n, _ in PYTHON])
def test_block_runs_and_prints_what_it_says(page: str, line: int, code: str,
                                            tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=_env(), timeout=180)
    assert out.returncode == 0, out.stderr
    printed = out.stdout.splitlines()
    at = 0
    for promise in expected_lines(code):
        while at < len(printed) and not _matches(promise, printed[at]):
            at += 1
        assert at < len(printed), f"{page}:{line}: never printed {promise!r}:\n{out.stdout}"
        at += 1


def test_expected_lines_are_read_in_order() -> None:
    code = "print(1)  # -> 1\nprint('a')\n# -> a\n# a plain comment\n"
    assert expected_lines(code) == ["1", "a"]
    assert _matches("circuit open until ...Z", "circuit open until 09:00:30Z")
    assert not _matches("[1]", "[12]")


def test_the_pages_show_cli_commands() -> None:
    commands = [c for _, _, c in COMMANDS]
    assert any(" demo" in c for c in commands) and any(" resolve" in c for c in commands)


@pytest.mark.parametrize(("page", "line", "command"), COMMANDS,
                         ids=[f"{p}:{c}" for p, _, c in COMMANDS])
def test_cli_command_runs_and_keeps_something(page: str, line: int, command: str) -> None:
    argv = [sys.executable, "-m", "lionctx", *shlex.split(command)[1:]]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=_env(),
                         timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
    if " resolve" in command and "--face agentium" not in command:
        # A documented resolve keeps at least one source's text.
        assert "fired" in out.stdout, f"{page}:{line}: {command} kept nothing:\n{out.stdout}"

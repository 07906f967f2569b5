"""Files dropped by ``max_files`` must not vanish silently.

Thirty matching files under ``max_files=20``: twenty are included, and the other
ten are accounted for: in ``last_skipped`` (``over max_files 20``), in the
``degraded`` row with their count and the first few paths, and in ``lionctx
resolve``'s report, which takes ``--max-files`` and ``--max-file-size``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, RunContext, Status, resolve_context
from lionctx.providers import FilesystemContextProvider

pytestmark = pytest.mark.anyio


def thirty(folder: Path) -> list[str]:
    names = []
    for i in range(30):
        rel = f"{'sub/' if i % 3 == 0 else ''}n{i:02d}.md"
        (folder / rel).parent.mkdir(exist_ok=True)
        (folder / rel).write_text(f"note {i}")
        names.append(rel)
    return sorted(names)


async def test_every_dropped_file_is_reported(tmp_path: Path) -> None:
    names = thirty(tmp_path)
    p = FilesystemContextProvider(tmp_path, max_files=20, name="kb")
    reg = ContextProviderRegistry()
    reg.register(p)
    report = await reg.gather(SimpleNamespace(run_context=RunContext()), "q")
    assert report.outcomes[0].status is Status.FIRED
    assert p.last_included == names[:20]
    assert p.last_skipped == [(rel, "over max_files 20") for rel in names[20:]]
    reason = ("left out 10 more matching file(s), over max_files 20: "
              + ", ".join(names[20:25]) + " and 5 more")
    assert report.degraded == [{"provider_name": "kb", "reason": reason}]
    # Warm (nothing changed, nothing re-read): still reported.
    res = await resolve_context([p], "q", None)
    assert res.outcomes[0].cached and res.outcomes[0].degradation_reason == reason


async def test_a_new_file_past_the_limit_is_noticed(tmp_path: Path) -> None:
    names = thirty(tmp_path)
    p = FilesystemContextProvider(tmp_path, max_files=20)
    await p.fetch("", None)
    (tmp_path / "sub" / "zz.md").write_text("late")
    await p.fetch("", None)
    assert len(p.last_skipped) == 11 and p.last_included == names[:20]
    assert ("sub/zz.md", "over max_files 20") in p.last_skipped


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 12), limit=st.integers(1, 8), big=st.sets(st.integers(0, 11)))
def test_every_matching_file_is_included_or_skipped(n: int, limit: int, big: set[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for i in range(n):
            (base / f"f{i:02d}.md").write_text("x" * (50 if i in big else 5))
        p = FilesystemContextProvider(base, max_files=limit, max_file_size=20)
        anyio.run(p.fetch, "", None)
        seen = p.last_included + [rel for rel, _ in p.last_skipped]
        assert sorted(seen) == [f"f{i:02d}.md" for i in range(n)]
        assert len(p.last_included) <= limit
        assert (p.degradation_reason is None) == (not p.last_skipped)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lionctx", *args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_cli_flags_set_the_limits_and_the_report_shows_the_rest(tmp_path: Path) -> None:
    names = thirty(tmp_path)
    (tmp_path / "huge.md").write_text("h" * 300)
    proc = run_cli("resolve", "--fs", f"kb={tmp_path}", "--max-files", "5",
                   "--max-file-size", "200", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    row = doc["outcomes"][0]
    assert row["status"] == "fired"
    assert row["degradation_reason"] == (
        "skipped 1 file(s): huge.md (300 bytes, over max_file_size 200); left out 25 more "
        "matching file(s), over max_files 5: " + ", ".join(names[5:10]) + " and 20 more")
    assert doc["context"].count("\n# ") == 5


def test_cli_refuses_bad_limits_naming_them(tmp_path: Path) -> None:
    for flag, value in (("--max-files", "0"), ("--max-file-size", "-1"),
                        ("--max-files", "many")):
        proc = run_cli("resolve", "--fs", str(tmp_path), flag, value)
        assert proc.returncode == 2
        assert flag in proc.stderr and repr(value) in proc.stderr
    proc = run_cli("resolve", "--max-files", "3", "--fs", str(tmp_path))
    assert proc.returncode == 2 and "must follow a source" in proc.stderr


def test_config_keys_set_the_limits(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    thirty(docs)
    config = tmp_path / "sources.toml"
    config.write_text('[[providers]]\nkind = "fs"\npath = "docs"\nmax_files = 25\n')
    proc = run_cli("resolve", "--config", str(config), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["outcomes"][0]
    assert row["name"] == "docs"
    assert row["degradation_reason"].startswith(
        "left out 5 more matching file(s), over max_files 25: ")

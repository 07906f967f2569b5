"""What lionctx needs at run time, and what only its benchmarks need."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: the backport lionctx depends on there
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip()
            for r in requirements}


def test_aiofiles_is_a_bench_extra_not_a_runtime_dependency() -> None:
    project = _project()
    assert "aiofiles" not in _names(project["dependencies"])
    assert "aiofiles" in _names(project["optional-dependencies"]["bench"])


def test_every_module_imports_without_aiofiles() -> None:
    # A fresh interpreter where ``import aiofiles`` fails: every module still imports.
    code = textwrap.dedent("""
        import importlib, pkgutil, sys
        sys.modules["aiofiles"] = None
        import agentium_compat, lionctx
        done = 0
        for package in (lionctx, agentium_compat):
            for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                importlib.import_module(info.name)
                done += 1
        print(done)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 30

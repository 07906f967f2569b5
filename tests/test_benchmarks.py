"""Every benchmark module imports (so ``python -m benchmarks`` never dies on a stale
import) and exposes the ``run()`` the runner calls."""

from __future__ import annotations

import importlib

import pytest
from benchmarks.__main__ import main, module_names


@pytest.mark.parametrize("name", module_names())
def test_benchmark_module_imports_and_has_run(name: str) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    assert callable(module.run)


def test_unknown_benchmark_is_refused_with_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no_such_bench"]) == 2
    assert "bench_no_such_bench" in capsys.readouterr().err

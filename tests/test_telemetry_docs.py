"""Every Python block of docs/telemetry.md runs as written and prints what its
comments say."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).parent.parent / "docs" / "telemetry.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def _promised(block: str) -> list[str]:
    """What the block says it prints: ``print(...)  # shown`` and ``# shown`` lines
    right after a print."""
    lines = block.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.startswith("print(") and "  # " in line:
            out.append(line.split("  # ", 1)[1])
        elif line.startswith("# ") and i and lines[i - 1].startswith("print("):
            out.append(line[2:])
    return out


def test_the_page_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_page_block_prints_what_it_says(index, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(PAGE.parent.parent)}
    out = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    promised = _promised(BLOCKS[index])
    assert promised and out.stdout.splitlines() == promised

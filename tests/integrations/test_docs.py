"""Every Python block of docs/integrations.md runs as written, offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_block_runs(index, tmp_path):
    assert len(BLOCKS) == 4  # one per host
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["TMPDIR"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=180)
    assert out.returncode == 0, out.stderr
    shown = out.stdout.strip().splitlines()
    assert shown and ("['plan']" in shown[0] or "'fired', 'u1 of acme is on gold'" in shown[0])
    if "strip_context" in BLOCKS[index]:
        assert shown[1] == "['Be brief.']"  # the stripped history: no context left

"""Every Python block in the README runs as written, offline."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, tmp_path):
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith("OPENAI_")}
    out = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip(), "an example should show something"

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


ROOT = README.parent
COMMANDS = [
    line.split("  #")[0].strip()
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    for line in block.splitlines()
    if line.startswith(".venv/bin/lionctx ")
]


def test_readme_shows_cli_commands():
    assert any(" demo" in c for c in COMMANDS) and any(" resolve" in c for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_cli_command_runs(command):
    import os
    import shlex

    argv = [sys.executable, "-m", "lionctx", *shlex.split(command)[1:]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()

"""Each host example runs offline; importing lionctx's integrations imports no host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPECT = {
    "with_lionagi.py": ["fired: [{'provider_name': 'profile'", "plan: gold",
                       "report: [('profile', 'fired')]"],
    "with_openai_agents.py": ["model calls: 2 | fired: ['orders']", "Orders of u1"],
    "with_pydantic_ai.py": ["model calls: 2 | fired: ['orders']"],
    "with_agent_framework.py": ["model calls: 2 | fired: ['orders']", "session report: ['fired']"],
}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPENAI_") and k != "TIKTOKEN_CACHE_DIR"}
    env["TMPDIR"] = str(tmp_path)  # the LionAGI example seeds its tokenizer cache here
    return env


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example_runs_offline(name, tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / name)], capture_output=True,
                         text=True, cwd=tmp_path, env=_env(tmp_path), timeout=180)
    assert out.returncode == 0, out.stderr
    for needle in EXPECT[name]:
        assert needle in out.stdout
    assert not (tmp_path / "data").exists()  # LionAGI dumped no logs into the cwd


def test_integration_modules_import_no_host(tmp_path):
    code = (
        "import sys\n"
        "import lionctx.integrations, lionctx.integrations.openai_agents\n"
        "import lionctx.integrations.pydantic_ai, lionctx.integrations.lionagi\n"
        "hosts = ('agents', 'pydantic_ai', 'lionagi', 'agent_framework')\n"
        "print(sorted(h for h in hosts if h in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=_env(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_bundled_tokenizer_serves_lionagi_with_no_cache_set(tmp_path):
    # A fresh process, no TIKTOKEN_CACHE_DIR: use_bundled_tokenizer() is all it takes.
    code = (
        "from lionctx.integrations.lionagi import use_bundled_tokenizer\n"
        f"path = use_bundled_tokenizer({str(tmp_path / 'cache')!r})\n"
        "from lionagi.service.token_calculator import TokenCalculator\n"
        "print(path.name, TokenCalculator.tokenize('hello world'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=_env(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fb374d419588a4632f3f557e76b4b70aebbca790", "2"]

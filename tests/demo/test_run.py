"""``lionctx demo`` end to end, as a subprocess: offline, with a configured model,
with a dead model, and interrupted. Every run must leave nothing behind."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from lionctx.demo._world import demo_world
from lionctx.models import OpenAIChatModel
from lionctx.providers import HttpContextProvider
from lionctx.testing import ECHO_LABEL, LocalOpenAIServer

from ..cli.helpers import RUN_TIMEOUT, clean_env, port_is_closed, run_cli

CLEANED = re.compile(r"^cleaned up: servers on 127\.0\.0\.1 ports ((?:\d+ ?)+) stopped; "
                     r"removed (\S+)$", re.MULTILINE)


def table(stdout: str, heading: str) -> dict[str, list[str]]:
    """Rows of the report table printed after ``heading``."""
    lines = stdout[stdout.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("provider "))
    rows = {}
    for line in lines[start + 1:]:
        if line.startswith("budget:"):
            break
        rows[line.split()[0]] = line.split()
    return rows


def framed(stdout: str, title: str) -> str:
    start = stdout.index(f"----- {title} -----\n") + len(f"----- {title} -----\n")
    return stdout[start:stdout.index("\n----- end -----", start)]


def assert_left_nothing(stdout: str, expected_ports: int) -> None:
    match = CLEANED.search(stdout)
    assert match, stdout
    ports = [int(p) for p in match.group(1).split()]
    assert len(ports) == expected_ports
    for port in ports:
        assert port_is_closed(port), port
    assert not Path(match.group(2)).exists()
    assert "lionctx-demo-" in match.group(2)


def test_demo_offline_end_to_end():
    proc = run_cli("demo")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no logs, no live line: stderr is not a terminal
    out = proc.stdout

    for heading in ("1. LionAGI face", "2. agentium face"):
        rows = table(out, heading)
        assert list(rows) == ["notes", "profile", "status", "incidents", "archive", "tickets"]
        assert [rows[n][1] for n in rows] == ["fs", "sqlite", "http", "http", "fs", "mcp"]
        # the MCP source: the user's own tickets, from one child process over stdio
        assert rows["tickets"][2] == "fired"
        # the slow endpoint is contained: one row with its reason, the rest carry on
        assert rows["incidents"][2] == "timeout"
        assert " ".join(rows["incidents"]).endswith("timed out after 0.5s")
    lionagi = table(out, "1. LionAGI face")
    assert lionagi["notes"][5:7] == ["2", "300"]  # priority and cap columns
    assert "budget: " in out and " of 300 tokens used" in out

    # the system prompt the Branch would send: the system text, then tagged blocks
    prompt = framed(out, "system prompt the model would receive (Branch, render='tags')")
    assert prompt.startswith("You are the support assistant of Northwind Cloud.")
    kept = [n for n, row in lionagi.items() if row[2] == "fired"]
    assert re.findall(r'<context name="([^"]+)">', prompt) == kept
    assert '<context name="incidents">' not in prompt
    assert "T-5531" in prompt and "T-5602" not in prompt  # u-1042's tickets, not u-2077's

    # the agent turn: the offline echo model, labelled as such, and its reply
    assert "model: offline echo model at http://127.0.0.1:" in out
    sent = framed(out, "system prompt sent")
    agentium_kept = [n for n, row in table(out, "2. agentium face").items() if row[2] == "fired"]
    assert re.findall(r'<context name="([^"]+)">', sent) == agentium_kept
    reply = out[out.index("reply:\n") + len("reply:\n"):].splitlines()[0]
    assert reply.startswith(f"{ECHO_LABEL} You said: Is the billing API healthy right now")
    if agentium_kept:
        assert reply.endswith(f"| context seen: {', '.join(agentium_kept)}")
    assert_left_nothing(out, expected_ports=2)


def test_demo_uses_the_configured_model_and_sends_exactly_the_printed_prompt():
    with LocalOpenAIServer(models=("house-model",)) as srv:
        srv.script("Billing is degraded; phone support needs Enterprise.")
        proc = run_cli("demo", env=clean_env(OPENAI_BASE_URL=srv.base_url,
                                             OPENAI_API_KEY="sk-test-not-a-real-key",
                                             LIONCTX_MODEL="house-model"))
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert (f"model: house-model at {srv.base_url} (from OPENAI_BASE_URL / "
                "OPENAI_API_KEY)") in out
        assert "offline echo model" not in out
        assert "sk-test-not-a-real-key" not in out + proc.stderr
        reply = out[out.index("reply:\n") + len("reply:\n"):].splitlines()[0]
        assert reply == "Billing is degraded; phone support needs Enterprise."
        body = srv.requests[-1]
        assert body["model"] == "house-model"
        assert body["messages"][0] == {"role": "system",
                                       "content": framed(out, "system prompt sent")}
        assert body["messages"][-1] == {"role": "user", "content": framed(
            out, "user message sent")}
    assert_left_nothing(out, expected_ports=1)  # only the status server was the demo's


def test_demo_offline_flag_ignores_the_environment():
    proc = run_cli("demo", "--offline",
                   env=clean_env(OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="k"))
    assert proc.returncode == 0, proc.stderr
    assert "model: offline echo model" in proc.stdout
    assert_left_nothing(proc.stdout, expected_ports=2)


def test_demo_reports_a_dead_model_in_one_line_and_still_cleans_up():
    with LocalOpenAIServer() as srv:
        dead = srv.base_url  # a port that was just ours and is now closed
    proc = run_cli("demo", env=clean_env(OPENAI_BASE_URL=dead, OPENAI_API_KEY="k"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    failed = [line for line in proc.stdout.splitlines() if "the model call failed" in line]
    assert len(failed) == 1
    assert_left_nothing(proc.stdout, expected_ports=1)


def test_demo_interrupted_cleans_up_and_exits_130():
    # A long per-source timeout holds the demo on the slow endpoint until we interrupt.
    proc = subprocess.Popen([sys.executable, "-m", "lionctx", "demo", "--timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(), stdin=subprocess.DEVNULL)
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("1. LionAGI face"):
            break
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=RUN_TIMEOUT)
    out = "".join(seen) + rest
    assert proc.returncode == 130, (out, err)
    assert err == "lionctx demo: interrupted\n"
    assert "reply:" not in out
    assert_left_nothing(out, expected_ports=2)


# -- closing (in process) and text from outside (subprocess) ------------------------

class _RecordingModel(OpenAIChatModel):
    """The real chat model, noting that it was closed."""

    closed = False

    async def aclose(self) -> None:
        await super().aclose()
        self.closed = True


def _demo_run(world, server, out):
    from lionctx.cli._terminal import LiveStatus, Style
    from lionctx.demo._run import _Run

    model = _RecordingModel("lionctx-echo", base_url=server.base_url, api_key="unused")
    live = LiveStatus([], enabled=False)
    return _Run(out, Style(False), live, world, model, "echo", True, 0.5)


@pytest.mark.anyio
async def test_demo_closes_every_provider_and_the_model_when_one_close_fails():
    from lionctx.cli._sources import build_provider
    from lionctx.demo._run import _main
    from lionctx.providers import FilesystemContextProvider

    closed: list[str] = []

    class BadClose(FilesystemContextProvider):
        async def aclose(self) -> None:
            closed.append(self.name)
            raise RuntimeError("archive cannot close")

    class Http(HttpContextProvider):
        async def aclose(self) -> None:
            await super().aclose()
            closed.append(self.name)

    def build(spec):
        if spec.kind == "http":
            return Http(spec.target, name=spec.name, timeout=5)
        if spec.name == "archive":
            return BadClose(spec.target, glob="*.md", name="archive")
        return build_provider(spec, run.timeout)

    out = io.StringIO()
    with demo_world() as world, LocalOpenAIServer() as server:
        run = _demo_run(world, server, out)
        status = await _main(run, build)
    assert status == 0  # the failed close neither hid the result nor raised
    assert "[offline echo model] You said:" in out.getvalue()
    assert closed == ["status", "incidents", "archive"]
    assert run.model.closed


@pytest.mark.anyio
async def test_demo_closes_what_it_built_when_a_later_provider_fails_to_build():
    from lionctx.cli._sources import build_provider
    from lionctx.demo._run import _main

    closed: list[str] = []

    class Http(HttpContextProvider):
        async def aclose(self) -> None:
            await super().aclose()
            closed.append(self.name)

    def build(spec):
        if spec.name == "incidents":
            raise ValueError("the archive cannot be built")
        if spec.kind == "http":
            return Http(spec.target, name=spec.name)
        return build_provider(spec, run.timeout)

    out = io.StringIO()
    with demo_world() as world, LocalOpenAIServer() as server:
        run = _demo_run(world, server, out)
        with pytest.raises(ValueError, match="cannot be built"):
            await _main(run, build)
    assert closed == ["status"]
    assert run.model.closed
    assert out.getvalue() == ""  # nothing ran


def test_demo_spells_out_control_characters_in_a_model_reply():
    hostile = "ok\x1b]0;pwned\x07\x1b[2J \u202egnp.exe"
    with LocalOpenAIServer(models=("house-model",)) as srv:
        srv.script(hostile)
        proc = run_cli("demo", env=clean_env(OPENAI_BASE_URL=srv.base_url,
                                             OPENAI_API_KEY="sk-test-not-a-real-key",
                                             LIONCTX_MODEL="house-model"))
    assert proc.returncode == 0, proc.stderr
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in proc.stdout + proc.stderr
    reply = proc.stdout[proc.stdout.index("reply:\n") + len("reply:\n"):].splitlines()[0]
    assert reply == "ok\\x1b]0;pwned\\x07\\x1b[2J \\u202egnp.exe"

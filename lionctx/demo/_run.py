"""``lionctx demo``: the sample sources (:mod:`._world`) resolved through both faces, one
agent turn (a configured model, else the offline echo model), three later turns (cache
breaks, a circuit opening), then everything stopped and removed."""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from ..cli._resolve import FaceRun, Plan, aclose_all, cache_line, open_providers
from ..cli._sources import SourceSpec
from ..cli._terminal import LiveStatus, Style, visible, want_color
from ..providers._redact import public_url
from . import _samples as samples
from ._world import DemoWorld, demo_world

__all__ = ["run_demo"]

#: Tokens kept per pass: notes, profile and status fit (~250); the archive (~180) does not.
BUDGET = 300
#: How long any source may take (``--timeout``); the incidents endpoint takes 30 s.
SOURCE_TIMEOUT = 0.5
#: The MCP source's resource: the run context's user id fills it.
TICKETS_URI = "tickets://{user_id}/open"
_HAS_MCP = importlib.util.find_spec("mcp") is not None


@dataclass
class _Run:
    out: IO[str]
    style: Style
    live: LiveStatus
    world: DemoWorld
    model: Any
    model_label: str
    echo: bool
    timeout: float = SOURCE_TIMEOUT

    def __post_init__(self) -> None:
        self.plan = _plan(self.world, self.timeout)

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def heading(self, text: str) -> None:
        self.say()
        self.say(self.style(text, "bold", "cyan"))

    def framed(self, title: str, text: str) -> None:
        self.say(self.style(f"----- {title} -----", "dim"))
        self.say(visible(text))  # provider and model text: controls spelled out
        self.say(self.style("----- end -----", "dim"))


def _plan(world: DemoWorld, timeout: float) -> Plan:
    """The demo's sources and settings as a ``lionctx resolve`` run would take them."""
    url = world.status.url
    # The pass's timeout decides; the client's own (HTTP, MCP) is a backstop behind it.
    backstop = {"timeout": max(5.0, timeout + 1.0)}
    server = shlex.join([sys.executable, str(Path(__file__).with_name("_mcp_server.py"))])
    specs = [
        SourceSpec("fs", str(world.notes), "notes", name="notes", priority=2, cap=300,
                   glob="*.md"),
        SourceSpec("sqlite", str(world.database), "profile", name="profile", priority=3,
                   sql=samples.PROFILE_SQL),
        SourceSpec("http", f"{url}/status", "status", name="status", priority=3,
                   options={**backstop}),
        SourceSpec("http", f"{url}/incidents", "incidents", name="incidents", priority=1,
                   options={**backstop}),
        SourceSpec("fs", str(world.archive), "archive", name="archive", glob="*.md"),
        SourceSpec("mcp", server, "tickets", name="tickets", priority=2,
                   options={"uri": TICKETS_URI, **backstop}),
    ]
    return Plan(specs if _HAS_MCP else specs[:-1], samples.QUESTION, samples.USER_ID,
                budget=BUDGET, timeout=timeout, concurrent=True)


def _describe_sources(run: _Run) -> None:
    w, plan = run.world, run.plan
    where = {"notes": f" ({len(list(w.notes.iterdir()))} files)",
             "profile": f" (query: {samples.PROFILE_SQL})",
             "incidents": f" (answers after {w.status.slow_seconds:g}s: will time out on "
                          "purpose)",
             "archive": f" ({len(list(w.archive.iterdir()))} long file)"}
    width = max(len(str(s.name)) for s in plan.specs)
    for s in plan.specs:
        text = (f"{TICKETS_URI} from an MCP server over stdio (lionctx/demo/_mcp_server.py)"
                if s.kind == "mcp" else s.target + where.get(str(s.name), ""))
        run.say(f"  {str(s.name).ljust(width)}  {s.kind.ljust(6)}  "
                f"{visible(text, multiline=False)}")


async def _lionagi_face(run: _Run, providers: list[Any]) -> FaceRun:
    from ..branch import ContextBlock

    run.heading("1. LionAGI face: a ContextProviderRegistry on a Branch")
    run.say(f"   budget {BUDGET} tokens, concurrent, timeout {run.timeout:g}s per "
            "source; higher priority wins a budget conflict")
    lionagi = FaceRun(run.plan, providers, run.live, samples.SYSTEM_PROMPT, run.model)
    report = await lionagi.once()
    run.say()
    run.say(lionagi.report_text(run.style))
    run.say()
    request = lionagi.branch.build_request(
        samples.QUESTION,
        blocks=[ContextBlock(row["provider_name"], text)
                for row, text in zip(report.fired, report.blocks, strict=False)])
    run.framed("system prompt the model would receive (Branch, render='tags')",
               request[0]["content"])
    return lionagi


async def _agentium_face(run: _Run, providers: list[Any]) -> Any:
    run.heading("2. agentium face: resolve_context over the same provider objects")
    run.say(f"   concurrent, allSettled, blocks in list order, timeout {run.timeout:g}s, "
            f"budget {BUDGET} tokens (counted on the tagged blocks)")
    agentium = FaceRun(replace(run.plan, face="agentium"), providers, run.live)
    resolution = await agentium.once()
    run.say()
    run.say(agentium.report_text(run.style))
    return resolution


async def _agent_turn(run: _Run, providers: list[Any], resolution: Any) -> int:
    from agentium_compat import Agent

    from ..models import ModelError

    run.heading("3. One agent turn: Agent('support-bot').run(question), context from step 2")
    run.say(f"   model: {visible(run.model_label, multiline=False)}")
    agent = Agent(name="support-bot", model=run.model, instructions=samples.SYSTEM_PROMPT,
                  context_providers=providers, context_budget=BUDGET,
                  context_timeout=run.timeout)
    try:
        result = await agent.run(samples.QUESTION, user_id=samples.USER_ID, context=resolution)
    except ModelError as exc:
        shown = visible(str(exc), multiline=False)
        run.say(run.style(f"   the model call failed: {shown}", "red", "bold"))
        return 1
    run.say()
    run.framed("system prompt sent", result.system or "")
    run.framed("user message sent", samples.QUESTION)
    run.say()
    run.say(run.style("reply:", "bold"))
    run.say(visible(result.output))  # a real model's reply is text from outside
    if result.usage:
        usage = ", ".join(f"{k} {v}" for k, v in result.usage.items()
                          if isinstance(v, int) and not isinstance(v, bool))
        suffix = " (words, not model tokens: echo server)" if run.echo else ""
        run.say(run.style(visible(f"usage: {usage}{suffix}", multiline=False), "dim"))
    return 0


async def _later_turns(run: _Run, lionagi: FaceRun) -> None:
    run.heading("4. Later turns on the same branch: prompt-cache stability and circuit breakers")
    run.say("   each turn compares its blocks with the previous turn's; a source that failed "
            "or timed out 3 turns running is not called for 30 s")
    for turn in range(2, 5):
        report = await lionagi.once()
        incidents = next(o for o in report.outcomes if o.name == "incidents")
        what = (f"not called: {incidents.reason}" if incidents.circuit == "open"
                else incidents.status.value)
        run.say(f"   turn {turn}: {report.duration_ms:5.0f} ms | "
                f"{cache_line(report.cache_break, turn)} | incidents {what}")


async def _start_mcp_sources(run: _Run, providers: list[Any]) -> None:
    """Start each MCP server before the timed passes (one child process for every turn)."""
    import anyio

    from .._context import RunContext
    from ..providers import McpResourceProvider

    for provider in providers:
        if isinstance(provider, McpResourceProvider):
            with anyio.move_on_after(30):
                await provider.fetch("", RunContext(user_id=samples.USER_ID))
            error = provider.last_error
            state = "started" if error is None else f"not started: {error}"
            run.say(f"  ({provider.name}: MCP server over stdio "
                    f"{visible(state, multiline=False)})")


async def _main(run: _Run, build: Callable[[SourceSpec], Any] | None = None) -> int:
    """Build the providers (``build``, default the CLI's), run the steps; close every
    provider built and the model on any way out (a failed close never hides the result)."""
    try:
        async with open_providers(run.plan, build) as providers:
            await _start_mcp_sources(run, providers)
            lionagi = await _lionagi_face(run, providers)
            resolution = await _agentium_face(run, providers)
            status = await _agent_turn(run, providers, resolution)
            await _later_turns(run, lionagi)
            return status
    finally:
        await aclose_all([run.model])


def _pick_model(stack: ExitStack, offline: bool) -> tuple[Any, str, int | None]:
    """The model for the turn: (model, label, the offline echo server's port or None)."""
    from agentium_compat import openai

    if not offline and (os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")):
        model = openai()
        where = public_url(model.base_url or "https://api.openai.com/v1")
        return model, f"{model.model} at {where} (from OPENAI_BASE_URL / OPENAI_API_KEY)", None
    from ..testing import LocalOpenAIServer

    server = stack.enter_context(LocalOpenAIServer())
    label = (f"offline echo model at {server.base_url}: no language model, no network; it "
             "repeats the question and names the context blocks it received "
             "(set OPENAI_BASE_URL / OPENAI_API_KEY for a real model)")
    return openai("lionctx-echo", base_url=server.base_url), label, server.port


def run_demo(*, color: str = "auto", offline: bool = False,
             timeout: float = SOURCE_TIMEOUT, out: IO[str] | None = None) -> int:
    """Run the demo, printing to ``out`` (stdout); returns the exit status.

    ``offline`` uses the echo model even when ``OPENAI_*`` is set; ``timeout`` is
    the per-source timeout in seconds. Errors and Ctrl-C propagate, after
    everything the demo started is stopped and removed.
    """
    import anyio

    out = out if out is not None else sys.stdout
    style = Style(want_color(color, out))
    live = LiveStatus([])
    ports: list[int] = []
    root = None
    count = "six" if _HAS_MCP else "five"
    out.write(style("lionctx demo", "bold") + f": pre-turn context from {count} sources, "
              "all on this machine\n")
    try:
        with ExitStack() as stack:
            world = stack.enter_context(demo_world())
            root = world.root
            model, label, echo_port = _pick_model(stack, offline)
            ports = [world.status.port, *([echo_port] if echo_port is not None else [])]
            run = _Run(out, style, live, world, model, label, echo_port is not None, timeout)
            run.say(f"question: {samples.QUESTION}")
            run.say(f"user:     {samples.USER_ID}")
            run.say("sources:")
            _describe_sources(run)
            return int(anyio.run(_main, run))
    finally:
        # On every way out the ``with`` has stopped the servers and removed the folder.
        live.clear()
        if root is not None:
            out.write("\n" + style(f"cleaned up: servers on 127.0.0.1 ports "
                                   f"{' '.join(str(p) for p in ports)} stopped; "
                                   f"removed {visible(str(root), multiline=False)}",
                                   "dim") + "\n")
            out.flush()

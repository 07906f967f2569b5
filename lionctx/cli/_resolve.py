"""``lionctx resolve``: passes over the given sources, printed as text or JSON; the pass
runner (:class:`FaceRun`) and the provider closing the demo and ``lionctx mcp serve`` share."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .._log import logger_for
from ._sources import SourceSpec, UsageError, assign_names, build_provider, read_config
from ._terminal import LiveStatus, Style, format_table, json_safe, summary_line, visible, want_color

__all__ = ["DEFAULT_TIMEOUT", "FaceRun", "Plan", "aclose_all", "cmd_resolve", "make_plan",
           "open_providers", "run_plan"]

logger = logger_for(__name__)

#: Per-source timeout when neither flag nor config sets one: a dry run never hangs.
DEFAULT_TIMEOUT = 10.0


@dataclass
class Plan:
    """Everything a run will do, checked."""

    specs: list[SourceSpec]
    query: str = ""
    user: str | None = None
    tenant: str | None = None
    face: str = "lionagi"
    budget: float | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    deadline: float | None = None
    concurrent: bool = False
    fmt: str = "text"
    color: str = "never"
    turns: int = 1


def _tidy(value: Any) -> Any:
    """``2.0`` -> ``2``: whole numbers print and serialise as ints."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def make_plan(args: argparse.Namespace) -> Plan:
    """Merge the config file (if any) and the flags; flags win."""
    settings: dict[str, Any] = {}
    specs: list[SourceSpec] = []
    if args.config is not None:
        settings, specs = read_config(Path(args.config))
    specs += list(args.sources or [])
    if not specs:
        raise UsageError("no sources: give at least one --fs, --http or --sqlite, "
                         "or --config FILE")

    def pick(key: str, default: Any) -> Any:
        value = getattr(args, key)
        return value if value is not None else settings.get(key, default)

    face = pick("face", "lionagi")
    for spec in specs:
        spec.priority = _tidy(spec.priority)
    assign_names(specs)
    return Plan(specs=specs, query=pick("query", ""), user=pick("user", None),
                tenant=pick("tenant", None), face=face,
                budget=_tidy(pick("budget", 2000 if face == "lionagi" else None)),
                timeout=pick("timeout", DEFAULT_TIMEOUT), deadline=pick("deadline", None),
                concurrent=pick("concurrent", False), fmt=args.format, color=args.color,
                turns=getattr(args, "turns", 1) or 1)


async def aclose_all(items: Iterable[Any], *, timeout: float = 5.0) -> list[str]:
    """Close every item that has an ``aclose()``, in order; return those that failed.
    Each close is shielded and bounded by ``timeout``; one that raises an ``Exception`` or
    runs over is logged and the next closed anyway (interrupts are never caught)."""
    import anyio

    failed: list[str] = []
    for item in items:
        close = getattr(item, "aclose", None)
        if close is None:
            continue
        name = getattr(item, "name", None)
        label = type(item).__name__ + (f" {name!r}" if isinstance(name, str) and name else "")
        with anyio.move_on_after(timeout, shield=True) as scope:
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # one bad close costs a log line, not the others
                failed.append(label)
                logger.warning("closing %s failed: %s", label, type(exc).__name__)
                logger.debug("closing %s failed", label, exc_info=True)
                continue
        if scope.cancelled_caught:
            failed.append(label)
            logger.warning("closing %s did not finish within %gs; abandoned", label, timeout)
    return failed


@asynccontextmanager
async def open_providers(plan: Plan, build: Callable[[SourceSpec], Any] | None = None,
                         ) -> AsyncIterator[list[Any]]:
    """One provider per source (``build``, default :func:`build_provider`), in order; all
    those built are closed by :func:`aclose_all` on the way out, a build that raised too."""
    build = build or (lambda spec: build_provider(spec, plan.timeout))
    providers: list[Any] = []
    try:
        for spec in plan.specs:
            providers.append(build(spec))
        yield providers
    finally:
        await aclose_all(providers)


def cache_line(brk: Any, turn: int) -> str:
    """Whether turn ``turn``'s prefix matched the turn before, or which block ``brk`` broke it."""
    if brk is None:
        return f"prefix byte-identical to turn {turn - 1} (prompt cache can hit)"
    name = visible(str(brk.name), multiline=False)
    return f"cache break at block {brk.index}: {name!r} {brk.kind} since turn {turn - 1}"


@dataclass
class FaceRun:
    """One face's passes over the same providers, turn after turn: a registry on
    :attr:`branch` (lionagi) or ``resolve_context`` with this run's breaker board (agentium)."""

    plan: Plan
    providers: list[Any]
    live: LiveStatus = field(default_factory=lambda: LiveStatus([], enabled=False))
    system: str | None = None
    model: Any = None
    passes: list[Any] = field(default_factory=list)  # ProviderReports or Resolutions

    def __post_init__(self) -> None:
        from .._breaker import Breakers
        from .._context import RunContext
        from ..branch import Branch

        plan = self.plan
        self.run_context = RunContext(user_id=plan.user, tenant_id=plan.tenant)
        self.live.names = [str(s.name) for s in plan.specs]
        self.observer = self.live.on_outcome if self.live.enabled else None
        self.board = Breakers()  # a CLI run does not share the process board
        self.branch = Branch(self.system, self.model, run_context=self.run_context,
                             name="lionctx")
        registry = self.branch.providers
        registry.budget = plan.budget if plan.budget is not None else 2000
        registry.concurrent = plan.concurrent
        registry.timeout = plan.timeout
        registry.deadline = plan.deadline
        registry.on_outcome = self.observer
        for spec, provider in zip(plan.specs, self.providers, strict=False):
            if plan.face == "lionagi":
                registry.register(provider, priority=spec.priority, max_tokens=spec.cap,
                                  name=spec.name, volatile=spec.volatile)
            elif spec.volatile:
                provider.volatile = True  # the agentium face reads the provider's attribute

    @property
    def result(self) -> Any:
        """The last pass's result: a ``ProviderReport`` or a ``Resolution``."""
        return self.passes[-1] if self.passes else None

    @property
    def report(self) -> Any:
        """The last pass's :class:`~lionctx.Report`."""
        return self.result.report

    @property
    def context(self) -> str:
        """The last pass's blocks, tagged, stable ones first (as a tag-rendering Branch)."""
        return str(self.report.render())

    async def once(self) -> Any:
        """Run one pass (the live line shown while it runs); returns the face's result."""
        from ..branch import Instruction
        from ..resolve import resolve_context

        plan = self.plan
        run: Awaitable[Any]
        if plan.face == "lionagi":  # the registry keeps its own previous turn
            run = self.branch.providers.gather(self.branch, Instruction(plan.query), tagged=True)
        else:
            run = resolve_context(self.providers, plan.query, self.run_context,
                                  timeout=plan.timeout, deadline=plan.deadline,
                                  budget=plan.budget, on_outcome=self.observer,
                                  previous=self.result, breaker=self.board)
        self.passes.append(await self.live.watch(run))
        return self.result

    def report_text(self, style: Style) -> str:
        """The last pass's report table and summary line (agentium's has no priorities)."""
        report, lionagi = self.report, self.plan.face == "lionagi"
        table = format_table(report.outcomes, style, kinds=[s.kind for s in self.plan.specs],
                             show_priority=lionagi)
        return table + "\n" + summary_line(
            report.outcomes, report.budget, report.used_tokens, report.duration_ms,
            offered=report.offered_tokens if lionagi else None)


async def run_plan(plan: Plan, providers: list[Any], live: LiveStatus | None = None) -> FaceRun:
    """Resolve ``plan.turns`` times through the chosen face (the caller closes providers)."""
    run = FaceRun(plan, providers, live if live is not None else LiveStatus([], enabled=False))
    for _ in range(plan.turns):
        await run.once()
    return run


def _print_text(run: FaceRun, out: IO[str]) -> None:
    style = Style(want_color(run.plan.color, out))
    if run.context:
        out.write(visible(run.context) + "\n")  # source text: controls spelled out
    else:
        out.write(style("(no context: nothing was kept)", "dim") + "\n")
    out.write("\n" + style(f"-- report ({run.plan.face} face) --", "cyan") + "\n")
    out.write(run.report_text(style) + "\n")
    for turn, result in enumerate(run.passes[1:], 2):
        out.write(f"turn {turn}: {cache_line(result.cache_break, turn)}\n")


def _json_document(run: FaceRun) -> dict[str, Any]:
    plan = run.plan
    doc: dict[str, Any] = {"face": plan.face, "query": plan.query, "user": plan.user,
                           "tenant": plan.tenant, "context": run.context}
    report = dict(run.result.to_dict())
    report.pop("text", None)  # Resolution's name for what both faces call "context"
    doc.update(report)
    if plan.turns > 1:  # one row per turn after the first
        doc["turns"] = [{"turn": turn, "prefix_stable": r.prefix_stable,
                         "cache_break": r.cache_break and r.cache_break.to_dict()}
                        for turn, r in enumerate(run.passes[1:], 2)]
    sources = {s.name: s.kind for s in plan.specs}
    for row in doc["outcomes"]:
        row["source"] = sources.get(row["name"])
    return doc


async def _resolve(plan: Plan, live: LiveStatus) -> FaceRun:
    async with open_providers(plan) as providers:
        ignored = [str(s.name) for s in plan.specs if s.priority or s.cap is not None]
        if plan.face == "agentium" and ignored:  # said once every source was accepted
            print("lionctx resolve: note: the agentium face has no priorities or caps; "
                  f"ignored for {visible(', '.join(ignored), multiline=False)}",
                  file=sys.stderr)
        return await run_plan(plan, providers, live)


def cmd_resolve(args: argparse.Namespace) -> int:
    """``lionctx resolve``: exit status 0 when the pass ran, whatever the sources did."""
    import anyio

    plan = make_plan(args)
    run = anyio.run(_resolve, plan, LiveStatus([]))
    if plan.fmt == "json":
        # Exact text, nothing a terminal acts on left raw: json escapes C0, json_safe the rest.
        text = json.dumps(_json_document(run), indent=2, ensure_ascii=False)
        sys.stdout.write(json_safe(text) + "\n")
    else:
        _print_text(run, sys.stdout)
    return 0

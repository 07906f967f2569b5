"""``lionctx resolve``: one pass over the given sources, printed as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ._closing import opened
from ._sources import SourceSpec, UsageError, assign_names, build_provider, read_config
from ._terminal import LiveStatus, Style, format_table, json_safe, summary_line, visible, want_color

__all__ = ["DEFAULT_TIMEOUT", "Plan", "cmd_resolve", "make_plan", "open_providers",
           "report_text", "run_plan"]

#: Per-source timeout when neither a flag nor the config gives one: a dry run
#: should never hang on a source.
DEFAULT_TIMEOUT = 10.0


@dataclass
class Plan:
    """Everything ``lionctx resolve`` will do, checked."""

    specs: list[SourceSpec]
    query: str
    user: str | None
    tenant: str | None
    face: str
    budget: float | None
    timeout: float | None
    deadline: float | None
    concurrent: bool
    fmt: str
    color: str
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
    plan = Plan(specs=specs, query=pick("query", ""), user=pick("user", None),
                tenant=pick("tenant", None), face=face,
                budget=_tidy(pick("budget", 2000 if face == "lionagi" else None)),
                timeout=pick("timeout", DEFAULT_TIMEOUT), deadline=pick("deadline", None),
                concurrent=pick("concurrent", False), fmt=args.format, color=args.color,
                turns=getattr(args, "turns", 1) or 1)
    assign_names(specs)
    return plan


@asynccontextmanager
async def open_providers(
    plan: Plan, build: Callable[[SourceSpec], Any] | None = None,
) -> AsyncIterator[list[Any]]:
    """One provider per source (``build``, default :func:`build_provider` with the
    plan's timeout), in order, all closed when the block ends."""
    make = build if build is not None else (lambda spec: build_provider(spec, plan.timeout))
    async with opened(plan.specs, make) as providers:
        yield providers


async def run_plan(plan: Plan, providers: list[Any],
                   live: LiveStatus | None = None) -> dict[str, Any]:
    """Resolve ``plan.turns`` times through the chosen face (the caller closes the
    providers). Returns the last pass's ``context``, ``outcomes``, ``report`` (the
    face's ``to_dict()``), ``budget``, ``used_tokens``, ``offered_tokens``,
    ``duration_ms``, and ``turns``: one row per later turn (``turn``,
    ``prefix_stable``, ``cache_break``)."""
    from .._context import RunContext

    live = live if live is not None else LiveStatus([], enabled=False)
    observer = live.on_outcome if live.enabled else None
    ctx = RunContext(user_id=plan.user, tenant_id=plan.tenant)
    return await live.watch(_passes(plan, providers, ctx, observer))


async def _passes(plan: Plan, providers: list[Any], ctx: Any, observer: Any) -> dict[str, Any]:
    from .._breaker import Breakers
    from ..branch import Branch, Instruction
    from ..resolve import resolve_context

    if plan.face == "lionagi":
        branch = Branch(None, run_context=ctx, name="lionctx-resolve")
        registry = branch.providers
        registry.budget = plan.budget if plan.budget is not None else 2000
        registry.concurrent = plan.concurrent
        registry.timeout = plan.timeout
        registry.deadline = plan.deadline
        registry.on_outcome = observer
        for spec, provider in zip(plan.specs, providers, strict=False):
            registry.register(provider, priority=spec.priority, max_tokens=spec.cap,
                              name=spec.name, volatile=spec.volatile)

        async def once(previous: Any) -> Any:  # the registry keeps its own previous turn
            return await registry.gather(branch, Instruction(plan.query), tagged=True)
    else:
        for spec, provider in zip(plan.specs, providers, strict=False):
            if spec.volatile:
                provider.volatile = True  # the agentium face reads the provider's attribute
        board = Breakers()  # this run's own: a CLI run does not share the process board

        async def once(previous: Any) -> Any:
            return await resolve_context(providers, plan.query, ctx, timeout=plan.timeout,
                                         deadline=plan.deadline, budget=plan.budget,
                                         on_outcome=observer, previous=previous,
                                         breaker=board)

    result: Any = None
    turns = []
    for turn in range(1, plan.turns + 1):
        result = await once(result)
        if turn > 1:
            brk = result.cache_break
            turns.append({"turn": turn, "prefix_stable": result.prefix_stable,
                          "cache_break": brk.to_dict() if brk is not None else None})
    report = result.report
    # Rendered as a tag-rendering Branch would: stable blocks, then volatile ones.
    # agentium's report has no "offered" figure: its summary line leaves it out.
    return {"context": report.render(), "outcomes": list(report.outcomes),
            "report": result.to_dict(), "budget": report.budget,
            "used_tokens": report.used_tokens,
            "offered_tokens": report.offered_tokens if plan.face == "lionagi" else None,
            "duration_ms": report.duration_ms, "turns": turns}


def report_text(plan: Plan, result: dict[str, Any], style: Style) -> str:
    """The report table and the summary line of one result."""
    table = format_table(result["outcomes"], style, kinds=[s.kind for s in plan.specs],
                         show_priority=plan.face == "lionagi")
    return table + "\n" + summary_line(result["outcomes"], result["budget"],
                                       result["used_tokens"], result["duration_ms"],
                                       offered=result["offered_tokens"])


def _print_text(plan: Plan, result: dict[str, Any], out: IO[str]) -> None:
    style = Style(want_color(plan.color, out))
    context = result["context"]
    if context:
        out.write(visible(context) + "\n")  # source text: controls spelled out
    else:
        out.write(style("(no context: nothing was kept)", "dim") + "\n")
    out.write("\n" + style(f"-- report ({plan.face} face) --", "cyan") + "\n")
    out.write(report_text(plan, result, style) + "\n")
    for row in result["turns"]:
        turn, brk = row["turn"], row["cache_break"]
        if brk is None:
            out.write(f"turn {turn}: prefix byte-identical to turn {turn - 1} "
                      "(prompt cache can hit)\n")
        else:
            name = visible(str(brk["name"]), multiline=False)
            out.write(f"turn {turn}: cache break at block {brk['index']}: {name!r} "
                      f"{brk['kind']} since turn {turn - 1}\n")


def _json_document(plan: Plan, result: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"face": plan.face, "query": plan.query, "user": plan.user,
                           "tenant": plan.tenant, "context": result["context"]}
    report = dict(result["report"])
    report.pop("text", None)  # Resolution's name for what both faces call "context"
    doc.update(report)
    if plan.turns > 1:
        doc["turns"] = result["turns"]
    sources = {s.name: s.kind for s in plan.specs}
    for row in doc["outcomes"]:
        row["source"] = sources.get(row["name"])
    return doc


async def _resolve(plan: Plan, live: LiveStatus) -> dict[str, Any]:
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
    result = anyio.run(_resolve, plan, LiveStatus([s.name or "" for s in plan.specs]))
    if plan.fmt == "json":
        # Exact text (a parser reads back every character), with nothing a terminal
        # would act on left raw: json escapes C0, json_safe the rest.
        text = json.dumps(_json_document(plan, result), indent=2, ensure_ascii=False)
        sys.stdout.write(json_safe(text) + "\n")
    else:
        _print_text(plan, result, sys.stdout)
    return 0

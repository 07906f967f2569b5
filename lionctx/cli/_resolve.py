"""``lionctx resolve``: one pass over the given sources, printed as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ._closing import opened
from ._sources import (
    SourceSpec,
    UsageError,
    assign_names,
    build_provider,
    read_config,
    tidy_number,
)
from ._terminal import (
    LiveStatus,
    Style,
    format_table,
    json_safe,
    summary_line,
    visible,
    want_color,
)

if TYPE_CHECKING:  # pragma: no cover
    from .._report import Report

__all__ = ["DEFAULT_TIMEOUT", "Plan", "make_plan", "open_providers", "cmd_resolve",
           "run_plan"]

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
        if value is not None:
            return value
        return settings.get(key, default)

    face = pick("face", "lionagi")
    budget = pick("budget", 2000 if face == "lionagi" else None)
    if budget is not None:
        budget = tidy_number(budget)
    for spec in specs:
        spec.priority = tidy_number(spec.priority)
    plan = Plan(
        specs=specs,
        query=pick("query", ""),
        user=pick("user", None),
        tenant=pick("tenant", None),
        face=face,
        budget=budget,
        timeout=pick("timeout", DEFAULT_TIMEOUT),
        deadline=pick("deadline", None),
        concurrent=pick("concurrent", False),
        fmt=args.format,
        color=args.color,
        turns=getattr(args, "turns", 1) or 1,
    )
    assign_names(specs)
    return plan


@asynccontextmanager
async def open_providers(
    plan: Plan, build: Callable[[SourceSpec], Any] | None = None,
) -> AsyncIterator[list[Any]]:
    """One provider per source, in order, all closed when the block ends.

    A bad option is a :class:`UsageError`; the providers built before it are
    closed first. ``build`` makes one provider from a spec (default:
    :func:`~lionctx.cli._sources.build_provider` with the plan's timeout).
    """
    make = build if build is not None else (lambda spec: build_provider(spec, plan.timeout))
    async with opened(plan.specs, make) as providers:
        yield providers


async def run_plan(plan: Plan, providers: list[Any],
                   live: LiveStatus | None = None) -> dict[str, Any]:
    """Resolve once through the chosen face (the caller closes the providers).

    Returns ``{"context", "outcomes", "report", "budget", "used_tokens",
    "offered_tokens", "duration_ms", "turns"}`` for the last of ``plan.turns``
    passes; ``turns`` has one row per later turn: ``{"turn", "prefix_stable",
    "cache_break"}``.
    """
    import anyio

    from .._context import RunContext

    ctx = RunContext(user_id=plan.user, tenant_id=plan.tenant)
    observer = live.on_outcome if live is not None and live.enabled else None
    try:
        async with anyio.create_task_group() as tg:
            if live is not None and observer is not None:
                live.start()
                tg.start_soon(live.tick)
            if plan.face == "lionagi":
                result = await _resolve_lionagi(plan, providers, ctx, observer)
            else:
                result = await _resolve_agentium(plan, providers, ctx, observer)
            tg.cancel_scope.cancel()  # stops the ticker
    finally:
        if live is not None:
            live.clear()
    return result


def _flatten(report: Report, data: dict[str, Any], turns: list[dict[str, Any]], *,
             offered: bool) -> dict[str, Any]:
    """One pass's result as ``run_plan`` returns it, from the one report (either face):
    ``data`` is the face's own ``to_dict()``, the JSON document's body."""
    return {"context": report.render(), "outcomes": list(report.outcomes), "report": data,
            "budget": report.budget, "used_tokens": report.used_tokens,
            "offered_tokens": report.offered_tokens if offered else None,
            "duration_ms": report.duration_ms,
            "tokenizer_load_ms": report.tokenizer_load_ms, "turns": turns}


async def _resolve_lionagi(plan: Plan, providers: list[Any], ctx: Any,
                           observer: Any) -> dict[str, Any]:
    from ..branch import Branch, Instruction

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
    turns = []
    for turn in range(plan.turns):
        report = await registry.gather(branch, Instruction(plan.query), tagged=True)
        if turn:
            turns.append(_turn_row(turn + 1, report.prefix_stable, report.cache_break))
    # Rendered as a tag-rendering Branch would: stable blocks, then volatile ones.
    return _flatten(report.report, report.to_dict(), turns, offered=True)


def _turn_row(turn: int, stable: bool | None, brk: Any) -> dict[str, Any]:
    return {"turn": turn, "prefix_stable": stable,
            "cache_break": brk.to_dict() if brk is not None else None}


def turn_line(row: dict[str, Any]) -> str:
    """``turn 2: prefix byte-identical to turn 1 (prompt cache can hit)`` or the break."""
    brk = row["cache_break"]
    if brk is None:
        return (f"turn {row['turn']}: prefix byte-identical to turn {row['turn'] - 1} "
                "(prompt cache can hit)")
    name = visible(str(brk["name"]), multiline=False)
    return (f"turn {row['turn']}: cache break at block {brk['index']}: {name!r} "
            f"{brk['kind']} since turn {row['turn'] - 1}")


async def _resolve_agentium(plan: Plan, providers: list[Any], ctx: Any,
                            observer: Any) -> dict[str, Any]:
    from .._breaker import Breakers
    from ..resolve import resolve_context

    for spec, provider in zip(plan.specs, providers, strict=False):
        if spec.volatile:
            provider.volatile = True  # the agentium face reads the provider's attribute
    resolution = None
    turns = []
    board = Breakers()  # this run's own: a CLI run does not share the process board
    for turn in range(plan.turns):
        resolution = await resolve_context(providers, plan.query, ctx, timeout=plan.timeout,
                                           deadline=plan.deadline, budget=plan.budget,
                                           on_outcome=observer, previous=resolution,
                                           breaker=board)
        if turn:
            turns.append(_turn_row(turn + 1, resolution.prefix_stable, resolution.cache_break))
    assert resolution is not None
    # agentium's report has no "offered" figure: the summary line leaves it out
    return _flatten(resolution.report, resolution.to_dict(), turns, offered=False)


def _print_text(plan: Plan, result: dict[str, Any], out: IO[str]) -> None:
    style = Style(want_color(plan.color, out))
    context = result["context"]
    if context:
        out.write(visible(context) + "\n")  # source text: controls spelled out
    else:
        out.write(style("(no context: nothing was kept)", "dim") + "\n")
    out.write("\n" + style(f"-- report ({plan.face} face) --", "cyan") + "\n")
    out.write(format_table(result["outcomes"], style,
                           kinds=[s.kind for s in plan.specs],
                           show_priority=plan.face == "lionagi") + "\n")
    out.write(summary_line(result["outcomes"], result["budget"], result["used_tokens"],
                           result["duration_ms"], offered=result["offered_tokens"]) + "\n")
    for row in result.get("turns", ()):
        out.write(turn_line(row) + "\n")


def _json_document(plan: Plan, result: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"face": plan.face, "query": plan.query, "user": plan.user,
                           "tenant": plan.tenant, "context": result["context"]}
    report = dict(result["report"])
    report.pop("text", None)  # Resolution's name for what both faces call "context"
    doc.update(report)
    if plan.turns > 1:
        doc["turns"] = result.get("turns", [])
    sources = {s.name: s.kind for s in plan.specs}
    for row in doc["outcomes"]:
        row["source"] = sources.get(row["name"])
    return doc


def _note_ignored(plan: Plan) -> None:
    if plan.face != "agentium":
        return
    ignored = [s.name for s in plan.specs if s.priority or s.cap is not None]
    if ignored:
        names = visible(", ".join(str(n) for n in ignored), multiline=False)
        print(f"lionctx resolve: note: the agentium face has no priorities or caps; "
              f"ignored for {names}", file=sys.stderr)


async def _resolve(plan: Plan, live: LiveStatus) -> dict[str, Any]:
    async with open_providers(plan) as providers:
        _note_ignored(plan)  # only once every source was accepted
        return await run_plan(plan, providers, live)


def cmd_resolve(args: argparse.Namespace) -> int:
    """``lionctx resolve``: exit status 0 when the pass ran, whatever the sources did."""
    import anyio

    plan = make_plan(args)
    live = LiveStatus([s.name or "" for s in plan.specs])
    result = anyio.run(_resolve, plan, live)
    if plan.fmt == "json":
        # Exact text (a parser reads back every character), with nothing a terminal
        # would act on left raw: json escapes C0, json_safe the rest.
        text = json.dumps(_json_document(plan, result), indent=2, ensure_ascii=False)
        sys.stdout.write(json_safe(text) + "\n")
    else:
        _print_text(plan, result, sys.stdout)
    return 0

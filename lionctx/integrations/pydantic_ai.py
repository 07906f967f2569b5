"""lionctx inside Pydantic AI (``pip install 'lionctx[pydantic-ai]'``).

::

    agent = Agent(model, deps_type=Deps,
                  instructions=["Be brief.", context_instructions(
                      providers, budget=800,
                      run_context=lambda deps: {"user_id": deps.user.id})])
    result = await agent.run("Where is my order?", deps=deps)
    report(result).outcomes                         # what each source did in this run
    store(strip_context(result.all_messages()))     # persist without the injected context

The providers run on the run's first model request; every request of the run gets
the same bytes. The query is ``RunContext.prompt``; the run context is
``run_context(deps)`` or ``deps`` (the bound one fills what it leaves unset). A
run's report is tied to its usage object and ``run_id``; the baseline is the
previous run of the same conversation, user and tenant. Pydantic AI stores the
instructions on each ``ModelRequest``: :func:`strip_context` removes them before a
history is persisted. This module does not import Pydantic AI
(``docs/integrations.md``).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from .._report import Report
from ._turns import DEFAULT_TIMEOUT, HostHook, TurnResolver, tie_report, tied_report

__all__ = ["DEFAULT_TIMEOUT", "ContextInstructions", "context_instructions", "report",
           "strip_context"]


class ContextInstructions(HostHook):
    """An instructions function for ``Agent(instructions=[...])`` or to register with
    ``agent.instructions(...)``.

    ``providers``: lionctx providers (anything with ``fetch(query, ctx)``).
    ``run_context``: a callable mapping the run's ``deps`` to a run context (sync or
    async), or a run context value. ``options``: those of
    :func:`lionctx.resolve_context` (``timeout`` (default 10 s), ``deadline``,
    ``budget``, ``limit``, ``counter``, ``on_outcome``, ``breaker``, ``dedupe``). A
    wrong argument raises here, naming it.
    """

    def __init__(self, providers: Any, *, run_context: Any = None, **options: Any) -> None:
        self._resolver = TurnResolver(providers, options, "context_instructions",
                                      run_context=run_context)

    async def __call__(self, ctx: Any) -> str:
        deps = getattr(ctx, "deps", None)
        run_ctx = await self._resolver.context_for(deps, deps)
        usage, run_id = _run_of(ctx)
        resolution = await self._resolver.resolve(
            usage, getattr(ctx, "prompt", None), run_ctx, key=run_id,
            session=getattr(ctx, "conversation_id", None))
        tie_report(usage, resolution.report, run_id)
        _index_run(run_id, usage)
        return resolution.text


#: run_id -> the run's usage object (weakly), for results whose ``usage`` is computed
#: anew (a streamed result's); a run_id that two live runs share maps to nothing.
_BY_RUN_ID: dict[str, weakref.ref[Any] | None] = {}
_INDEX_LOCK = threading.Lock()
_NONE: Any = object()


def _index_run(run_id: Any, usage: Any) -> None:
    if not isinstance(run_id, str) or usage is None:
        return
    with _INDEX_LOCK:
        held = _BY_RUN_ID.get(run_id, _NONE)
        if held is _NONE:
            def drop(ref: weakref.ref[Any], run_id: str = run_id) -> None:
                with _INDEX_LOCK:
                    if _BY_RUN_ID.get(run_id) is ref:
                        del _BY_RUN_ID[run_id]
            try:
                _BY_RUN_ID[run_id] = weakref.ref(usage, drop)
            except TypeError:
                pass
        elif held is None or held() is not usage:
            _BY_RUN_ID[run_id] = None  # ambiguous: never another run's report


def _run_of(run: Any) -> tuple[Any, Any]:
    # The usage object lives for the run (runs given the same usage= share it, so the
    # run_id tells them apart).
    usage = getattr(run, "usage", None)
    if callable(usage) and not hasattr(usage, "requests"):  # an older usage() method
        usage = usage()
    return usage, getattr(run, "run_id", None)


#: :class:`ContextInstructions` under the name the docs use.
context_instructions = ContextInstructions


def report(run: Any) -> Report | None:
    """The lionctx report of one run: pass its ``AgentRunResult``, a
    ``StreamedRunResult``, the ``AgentRun`` of ``agent.iter`` or a ``RunContext`` of
    the run. ``None`` when no lionctx instructions ran in it."""
    usage, run_id = _run_of(run)
    found = tied_report(usage, run_id) if usage is not None else None
    if found is None and isinstance(run_id, str):
        held = _BY_RUN_ID.get(run_id)
        holder = held() if held is not None else None
        if holder is not None:
            found = tied_report(holder, run_id)
    return found


#: One lionctx block as rendered: provider text never holds ``</context`` (the renderer
#: neutralizes it), so the first ``\n</context>`` ends the block.
_BLOCK = re.compile(r'<context name="[^"\n]*">\n.*?\n</context>', re.DOTALL)
_BLANKS = re.compile(r"\n{3,}")


def _without_blocks(text: str) -> str:
    return _BLANKS.sub("\n\n", _BLOCK.sub("", text)).strip("\n")


def strip_context(messages: Sequence[Any]) -> list[Any]:
    """``messages`` (a Pydantic AI message history) without lionctx's context.

    Each ``ModelRequest`` whose ``instructions`` hold ``<context name="...">`` blocks
    is replaced by a copy without them (``instructions=None`` when nothing else is
    left); every other message is kept as it is. The list given is not changed::

        history = strip_context(result.all_messages())
    """
    out: list[Any] = []
    for message in messages:
        instructions = getattr(message, "instructions", None)
        if (isinstance(instructions, str) and "<context name=" in instructions
                and dataclasses.is_dataclass(message) and not isinstance(message, type)):
            kept = _without_blocks(instructions)
            message = dataclasses.replace(message, instructions=kept or None)
        out.append(message)
    return out

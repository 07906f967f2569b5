"""lionctx inside Pydantic AI (``pip install 'lionctx[pydantic-ai]'``)::

    agent = Agent(model, deps_type=Deps, instructions=["Be brief.", context_instructions(
        providers, budget=800, run_context=lambda deps: {"user_id": deps.user.id})])
    result = await agent.run("Where is my order?", deps=deps)
    report(result).outcomes                         # what each source did in this run
    store(strip_context(result.all_messages()))     # persist without the injected context

Does not import Pydantic AI; see ``docs/integrations.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from .._report import Report
from .._weakid import WeakIdMap
from ._turns import DEFAULT_TIMEOUT, HostHook, tied_report

__all__ = ["DEFAULT_TIMEOUT", "ContextInstructions", "context_instructions", "report",
           "strip_context"]


class ContextInstructions(HostHook):
    """An instructions function for ``Agent(instructions=[...])`` resolving
    ``providers`` once per run. ``run_context``: a callable of the run's ``deps`` (sync
    or async) or a value. ``options``: those of :func:`lionctx.resolve_context`
    (``timeout`` defaults to 10 s). A wrong argument raises here, naming it.
    """

    async def __call__(self, ctx: Any) -> str:
        deps = getattr(ctx, "deps", None)
        usage, run_id = _run_of(ctx)
        resolution = await self.run_once(usage, getattr(ctx, "prompt", None), deps, deps,
                                         key=run_id, session=getattr(ctx, "conversation_id", None))
        if isinstance(run_id, str) and usage is not None:
            _index_run(run_id, usage)
        return resolution.text


#: run_id -> the run's usage object (weakly), for results whose ``usage`` is computed
#: anew (a streamed result's); a run_id that two live runs share maps to a marker that
#: holds no report, never to another run's, kept alive by those runs' usage objects
#: alone (:data:`_MARKERS`): it goes when they end.
_BY_RUN_ID: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_INDEX_LOCK = threading.Lock()


class _Ambiguous:
    """The holder of a run_id two live runs share: it has no report."""


#: usage object -> the markers of the run_ids it shares (dropped with it).
_MARKERS: WeakIdMap[list[_Ambiguous]] = WeakIdMap()


def _index_run(run_id: str, usage: Any) -> None:
    with _INDEX_LOCK:
        if (held := _BY_RUN_ID.get(run_id)) is None:
            with contextlib.suppress(TypeError):  # not weakly referenceable: not indexed
                _BY_RUN_ID[run_id] = usage
        elif held is not usage:
            shared = type(held) is _Ambiguous
            marker = _BY_RUN_ID[run_id] = held if shared else _Ambiguous()
            for owner in (usage,) if shared else (held, usage):
                kept = _MARKERS.setdefault(owner, list)
                if kept is not None and marker not in kept:
                    kept.append(marker)


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
    found = tied_report(usage, run_id)
    if found is None and isinstance(run_id, str):
        found = tied_report(_BY_RUN_ID.get(run_id), run_id)
    return found


#: One lionctx block as rendered: provider text never holds ``</context`` (the renderer
#: neutralizes it), so the first ``\n</context>`` ends the block.
_BLOCK = re.compile(r'<context name="[^"\n]*">\n.*?\n</context>', re.DOTALL)
_BLANKS = re.compile(r"\n{3,}")


def strip_context(messages: Sequence[Any]) -> list[Any]:
    """A copy of ``messages`` (a Pydantic AI history) whose ``ModelRequest`` rows have
    lionctx's ``<context name="...">`` blocks removed from their ``instructions``
    (``None`` when nothing else is left); the list given is not changed."""
    out: list[Any] = []
    for message in messages:
        instructions = getattr(message, "instructions", None)
        if (isinstance(instructions, str) and "<context name=" in instructions
                and dataclasses.is_dataclass(message) and not isinstance(message, type)):
            kept = _BLANKS.sub("\n\n", _BLOCK.sub("", instructions)).strip("\n")
            message = dataclasses.replace(message, instructions=kept or None)
        out.append(message)
    return out

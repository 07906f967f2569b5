"""lionctx inside Pydantic AI (``pip install 'lionctx[pydantic-ai]'``).

::

    from pydantic_ai import Agent
    from lionctx.integrations.pydantic_ai import context_instructions

    ctx_instructions = context_instructions(providers, budget=800, timeout=2)
    agent = Agent(model, deps_type=dict, instructions=["Be brief.", ctx_instructions])
    result = await agent.run("Where is my order?", deps={"user_id": "u1"})
    ctx_instructions.report_for(result).fired     # what each source did this run

Pydantic AI re-runs instruction functions before every model request of a run (a
tool round makes two); the providers run on the first request only, keyed by the
run's ``run_id``, and every request of the run gets the same bytes. The query is
``RunContext.prompt`` (the text parts of a multimodal prompt); the run context is
``deps`` (a :class:`lionctx.RunContext`, a mapping or any object with the fields),
else the one bound with :func:`lionctx.bind_run_context`.

This module does not import Pydantic AI: it only reads the objects it passes in.
"""

from __future__ import annotations

from typing import Any

from ..resolve import Resolution
from ._turns import ResolverBacked, TurnResolver

__all__ = ["ContextInstructions", "context_instructions"]


class ContextInstructions(ResolverBacked):
    """An instructions function for ``pydantic_ai.Agent``; see the module docstring."""

    def __init__(self, providers: Any, **options: Any) -> None:
        self._resolver = TurnResolver(providers, options, "context_instructions")


    def report_for(self, run: Any) -> Resolution | None:
        """The report of a run: its ``AgentRunResult``, ``RunContext`` or ``run_id``."""
        run_id = run if isinstance(run, str) else getattr(run, "run_id", None)
        return self._resolver.report_for(run_id) if run_id is not None else None

    async def __call__(self, ctx: Any) -> str:
        # run_id names one agent.run; without one (older versions) the deps object
        # and the prompt do.
        turn = getattr(ctx, "run_id", None) or (id(ctx.deps), repr(ctx.prompt))
        resolution = await self._resolver.resolve(turn, getattr(ctx, "prompt", None),
                                                  getattr(ctx, "deps", None))
        return resolution.text


def context_instructions(providers: Any, **options: Any) -> ContextInstructions:
    """An instructions function for ``Agent(instructions=[...])`` or to register with
    ``agent.instructions(...)``.

    ``providers``: lionctx providers (anything with ``fetch(query, ctx)``).
    ``options``: those of :func:`lionctx.resolve_context` (``timeout``, ``deadline``,
    ``budget``, ``limit``, ``counter``, ``on_outcome``). A wrong argument raises
    here, naming it.
    """
    return ContextInstructions(providers, **options)

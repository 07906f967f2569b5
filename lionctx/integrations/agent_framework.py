"""lionctx inside Microsoft Agent Framework (``pip install 'lionctx[agent-framework]'``)::

    agent = Agent(client=client, instructions="Be brief.",
                  context_providers=[LionctxContextProvider(providers, budget=800)])
    with lionctx.bind_run_context(user_id="u1"):
        response = await agent.run("Where is my order?", session=session)
    report(response).outcomes                         # what each source did in this run
    session.state["lionctx"]["report"]                # the same, JSON-ready, no text

See ``docs/integrations.md``.
"""

from __future__ import annotations

from typing import Any

from agent_framework import ContextProvider

from .._report import Report
from ..providers._base import check_name
from ._turns import DEFAULT_TIMEOUT, HostHook, text_of, tie_report, tied_report

__all__ = ["DEFAULT_TIMEOUT", "LionctxContextProvider", "report"]


class LionctxContextProvider(HostHook, ContextProvider):
    """An ``agent_framework.ContextProvider`` resolving ``providers`` once per
    ``agent.run`` into the run's instructions. ``source_id``: the framework's
    attribution id. ``run_context``: a callable ``(session)`` or ``(session, context)``
    or a value. ``options``: those of :func:`lionctx.resolve_context` (``timeout``
    defaults to 10 s). A wrong argument raises here, naming it.
    """

    where = "LionctxContextProvider"

    def __init__(self, providers: Any, source_id: str = "lionctx", *,
                 run_context: Any = None, **options: Any) -> None:
        check_name(source_id, "LionctxContextProvider: source_id")
        ContextProvider.__init__(self, source_id)
        HostHook.__init__(self, providers, run_context=run_context, **options)

    async def before_run(self, *, agent: Any, session: Any, context: Any,
                         state: dict[str, Any]) -> None:
        """Resolve for this run and add the blocks to the run's instructions."""
        messages = getattr(context, "input_messages", None) or []
        query = text_of(getattr(messages[-1], "text", None)) if messages else ""
        previous = state.get("digests")
        # SessionContext is created fresh for each agent.run: it keys the run.
        resolution = await self.run_once(
            context, query, None, session, context, also=session,
            previous=tuple(tuple(d) for d in previous) if isinstance(previous, list) else None)
        # JSON-native for session stores; without the text, so no source's text is
        # persisted with the session.
        state["report"] = resolution.report.to_dict()
        state["digests"] = [list(d) for d in resolution.report.digests]
        if resolution.text:
            context.extend_instructions(self.source_id, resolution.text)

    async def after_run(self, *, agent: Any, session: Any, context: Any,
                        state: dict[str, Any]) -> None:
        """Tie the run's report to its response."""
        rep = tied_report(context)
        response = getattr(context, "response", None)
        if rep is not None and response is not None:
            tie_report(response, rep)


def report(run: Any) -> Report | None:
    """The lionctx report of one run: pass the ``AgentResponse`` of ``agent.run``, a
    ``ResponseStream`` that has finished, or the ``AgentSession`` (its latest run).
    ``None`` when no lionctx provider ran for it."""
    found = tied_report(run)
    # A finished ResponseStream holds its response as _final_result.
    return found if found is not None else tied_report(getattr(run, "_final_result", None))

"""lionctx inside Microsoft Agent Framework (``pip install 'lionctx[agent-framework]'``).

::

    lionctx_provider = LionctxContextProvider(providers, budget=800)
    agent = Agent(client=client, instructions="Be brief.",
                  context_providers=[lionctx_provider], tools=[...])
    with lionctx.bind_run_context(user_id="u1"):
        response = await agent.run("Where is my order?", session=session)
    report(response).outcomes                         # what each source did in this run
    session.state["lionctx"]["report"]                # the same, JSON-ready, no text

A real ``agent_framework.ContextProvider``: ``before_run`` resolves once per
``agent.run`` and adds the blocks with ``context.extend_instructions``. The query is
the last input message's text; the run context is ``run_context=`` (a callable
``(session)`` or ``(session, context)``, or a value; the bound one fills the rest).
The baseline travels in the session's state (``digests``) (``docs/integrations.md``).
"""

from __future__ import annotations

from typing import Any

from agent_framework import ContextProvider

from .._exceptions import InvalidValue
from .._report import Report
from ._turns import DEFAULT_TIMEOUT, HostHook, TurnResolver, text_of, tie_report, tied_report

__all__ = ["DEFAULT_TIMEOUT", "LionctxContextProvider", "report"]


class LionctxContextProvider(HostHook, ContextProvider):
    """Resolve lionctx providers before each agent run; see the module docstring.

    ``providers``: lionctx providers (anything with ``fetch(query, ctx)``).
    ``source_id``: the framework's attribution id (default ``"lionctx"``).
    ``run_context``: see the module docstring. ``options``: those of
    :func:`lionctx.resolve_context` (``timeout`` (default 10 s), ``deadline``,
    ``budget``, ``limit``, ``counter``, ``on_outcome``, ``breaker``, ``dedupe``). A
    wrong argument raises here, naming it.
    """

    def __init__(self, providers: Any, source_id: str = "lionctx", *,
                 run_context: Any = None, **options: Any) -> None:
        if not isinstance(source_id, str) or not source_id:
            raise InvalidValue(f"LionctxContextProvider: source_id must be a non-empty str, "
                             f"got {source_id!r}")
        super().__init__(source_id)
        self._resolver = TurnResolver(providers, options, "LionctxContextProvider",
                                      run_context=run_context)

    async def before_run(self, *, agent: Any, session: Any, context: Any,
                         state: dict[str, Any]) -> None:
        """Resolve for this run and add the blocks to the run's instructions."""
        messages = getattr(context, "input_messages", None) or []
        query = text_of(getattr(messages[-1], "text", None)) if messages else ""
        ctx = await self._resolver.context_for(None, session, context)
        previous = state.get("digests")
        # SessionContext is created fresh for each agent.run: it keys the run.
        resolution = await self._resolver.resolve(
            context, query, ctx,
            previous=tuple(tuple(d) for d in previous) if isinstance(previous, list) else None)
        rep = resolution.report
        tie_report(context, rep)
        if session is not None:
            tie_report(session, rep)
        # JSON-native for session stores; without the text, so no source's text is
        # persisted with the session.
        state["report"] = rep.to_dict()
        state["digests"] = [list(d) for d in rep.digests]
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
    if found is None:
        final = getattr(run, "_final_result", None)  # a finished ResponseStream's response
        if final is not None:
            found = tied_report(final)
    return found

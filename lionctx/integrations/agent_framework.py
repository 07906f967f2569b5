"""lionctx inside Microsoft Agent Framework (``pip install 'lionctx[agent-framework]'``).

::

    from agent_framework import Agent
    from lionctx.integrations.agent_framework import LionctxContextProvider

    lionctx_provider = LionctxContextProvider(providers, budget=800, timeout=2)
    agent = Agent(client=client, instructions="Be brief.",
                  context_providers=[lionctx_provider], tools=[...])
    with lionctx.bind_run_context(user_id="u1"):
        response = await agent.run("Where is my order?", session=session)
    lionctx_provider.last_report.fired               # what each source did
    session.state["lionctx"]["report"]                # the same, JSON-ready, no text

A real ``agent_framework.ContextProvider``: its ``before_run`` resolves the providers
once per ``agent.run`` (the framework calls it once per run, however many model calls
the tool loop makes) and adds the tagged blocks with ``context.extend_instructions``.
The query is the text of the run's last input message. ``SessionContext`` carries no
user, so the run context is ``run_context=`` (a :class:`lionctx.RunContext`, a
mapping, or a callable ``(session, context) -> ctx``), else the one bound with
:func:`lionctx.bind_run_context`.

Importing this module imports ``agent_framework`` (the class must subclass its
``ContextProvider``); ``import lionctx`` never does.
"""

from __future__ import annotations

import inspect
from typing import Any

from agent_framework import ContextProvider

from .._exceptions import InvalidValue
from ._turns import ResolverBacked, TurnResolver, text_of

__all__ = ["LionctxContextProvider"]


class LionctxContextProvider(ResolverBacked, ContextProvider):
    """Resolve lionctx providers before each agent run; see the module docstring.

    ``providers``: lionctx providers (anything with ``fetch(query, ctx)``).
    ``source_id``: the framework's attribution id (default ``"lionctx"``).
    ``options``: those of :func:`lionctx.resolve_context` (``timeout``,
    ``deadline``, ``budget``, ``limit``, ``counter``, ``on_outcome``). A wrong
    argument raises here, naming it.
    """

    def __init__(self, providers: Any, source_id: str = "lionctx", *,
                 run_context: Any = None, **options: Any) -> None:
        if not isinstance(source_id, str) or not source_id:
            raise InvalidValue(f"LionctxContextProvider: source_id must be a non-empty str, "
                             f"got {source_id!r}")
        super().__init__(source_id)
        self._resolver = TurnResolver(providers, options, "LionctxContextProvider")
        self._run_context = run_context


    async def _ctx(self, session: Any, context: Any) -> Any:
        ctx = self._run_context
        if callable(ctx):
            ctx = ctx(session, context)
            if inspect.isawaitable(ctx):
                ctx = await ctx
        return ctx

    async def before_run(self, *, agent: Any, session: Any, context: Any,
                         state: dict[str, Any]) -> None:
        """Resolve for this run and add the blocks to the run's instructions."""
        messages = getattr(context, "input_messages", None) or []
        query = text_of(getattr(messages[-1], "text", None)) if messages else ""
        # SessionContext is created fresh for each agent.run: it keys the turn.
        resolution = await self._resolver.resolve(context, query,
                                                  await self._ctx(session, context))
        # JSON-native for session stores; without the text, so no source's text is
        # persisted with the session.
        report = resolution.to_dict()
        report.pop("text", None)
        state["report"] = report
        if resolution.text:
            context.extend_instructions(self.source_id, resolution.text)

"""lionctx inside the OpenAI Agents SDK (``pip install 'lionctx[openai-agents]'``).

::

    from agents import Agent, Runner
    from lionctx.integrations.openai_agents import context_instructions, report

    agent = Agent(name="support", model=model,
                  instructions=context_instructions(providers, instructions="Be brief.",
                                                    budget=800, timeout=2))
    result = await Runner.run(agent, "Where is my order?", context={"user_id": "u1"})
    report(result).fired          # what each source did this turn

The SDK calls ``instructions`` before every model call of a run (a tool round makes
two calls); the providers run on the first call only and every call of the run gets
the same bytes. The query is the run's latest user input (its text parts when it is
multimodal); the run context is the SDK's ``context`` (a :class:`lionctx.RunContext`,
a mapping or any object with the fields), else the one bound with
:func:`lionctx.bind_run_context`.

This module does not import the SDK: it only reads the objects the SDK passes in.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from .._exceptions import InvalidType
from ..resolve import Resolution
from ._turns import ResolverBacked, TurnResolver, compose, text_of

__all__ = ["ContextInstructions", "context_instructions", "latest_user_text", "report"]


def latest_user_text(items: Any) -> str:
    """The text of the last user item of a run's input (a str input is itself)."""
    if isinstance(items, str):
        return items
    if not isinstance(items, (list, tuple)):
        return text_of(items)
    for item in reversed(items):
        role = item.get("role") if isinstance(item, Mapping) else getattr(item, "role", None)
        if role == "user":
            content = (item.get("content") if isinstance(item, Mapping)
                       else getattr(item, "content", None))
            return text_of(content)
    return ""


class ContextInstructions(ResolverBacked):
    """The ``instructions`` callable for ``agents.Agent``; see the module docstring.

    ``last_report`` is the most recent turn's :class:`~lionctx.Resolution`;
    :func:`report` finds a given run's.
    """

    def __init__(self, providers: Any, *, instructions: Any = None, **options: Any) -> None:
        if (instructions is not None and not isinstance(instructions, str)
                and not callable(instructions)):
            raise InvalidType("context_instructions: instructions must be a str, a callable "
                            f"(context, agent) or None, got {instructions!r}")
        self._resolver = TurnResolver(providers, options, "context_instructions")
        self._base = instructions


    def report_for(self, wrapper: Any) -> Resolution | None:
        """The report of the run whose ``RunContextWrapper`` is ``wrapper``."""
        return self._resolver.report_for(wrapper)

    async def __call__(self, wrapper: Any, agent: Any) -> str:
        base = self._base
        if callable(base):
            base = base(wrapper, agent)
            if inspect.isawaitable(base):
                base = await base
        # The wrapper lives for one Runner.run (one user turn): it keys the turn.
        resolution = await self._resolver.resolve(
            wrapper, latest_user_text(getattr(wrapper, "turn_input", None)),
            getattr(wrapper, "context", None))
        _remember(wrapper, self, resolution)
        return compose(base, resolution.text)


def _remember(wrapper: Any, owner: ContextInstructions, resolution: Resolution) -> None:
    # The report rides on the run's own context wrapper, so report(result) finds it.
    try:
        reports = wrapper.__dict__.setdefault("_lionctx_reports", {})
    except AttributeError:
        return
    reports[id(owner)] = resolution


def context_instructions(providers: Any, *, instructions: Any = None,
                         **options: Any) -> ContextInstructions:
    """An ``instructions`` callable for ``agents.Agent(instructions=...)``.

    ``providers``: lionctx providers (anything with ``fetch(query, ctx)``).
    ``instructions``: the agent's own instructions (a str or a callable
    ``(context, agent)``), put before the context blocks. ``options``: those of
    :func:`lionctx.resolve_context` (``timeout``, ``deadline``, ``budget``, ``limit``,
    ``counter``, ``on_outcome``). A wrong argument raises here, naming it.
    """
    return ContextInstructions(providers, instructions=instructions, **options)


def report(run: Any) -> Resolution | None:
    """The lionctx report of a run: pass the ``RunResult`` (or its
    ``context_wrapper``). ``None`` when no lionctx instructions ran in it; with
    several, the last one resolved."""
    wrapper = getattr(run, "context_wrapper", run)
    reports = getattr(wrapper, "__dict__", {}).get("_lionctx_reports") or {}
    return list(reports.values())[-1] if reports else None

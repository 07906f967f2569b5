"""lionctx inside the OpenAI Agents SDK (``pip install 'lionctx[openai-agents]'``)::

    agent = Agent(name="support", model=model, instructions=context_instructions(
        providers, instructions="Be brief.", budget=800))
    result = await Runner.run(agent, "Where is my order?", context={"user_id": "u1"})
    report(result).outcomes       # what each source did in this run

Does not import the SDK; see ``docs/integrations.md``.
"""

from __future__ import annotations

import inspect
from typing import Any

from .._context import _read
from .._exceptions import InvalidType
from .._report import Report
from ._turns import DEFAULT_TIMEOUT, HostHook, text_of, tied_report

__all__ = ["DEFAULT_TIMEOUT", "ContextInstructions", "context_instructions",
           "latest_user_text", "report"]


def latest_user_text(items: Any) -> str:
    """The text of the last user item of a run's input (a str input is itself)."""
    if isinstance(items, str):
        return items
    if not isinstance(items, (list, tuple)):
        return text_of(items)
    for item in reversed(items):  # each a mapping or an object
        if _read(item, "role", None) == "user":
            return text_of(_read(item, "content", None))
    return ""


class ContextInstructions(HostHook):
    """An ``instructions`` callable for ``agents.Agent(instructions=...)`` resolving
    ``providers`` once per run. ``instructions``: the agent's own (a str or a callable
    ``(context, agent)``), put before the blocks. ``run_context``: a callable of the
    ``context`` given to ``Runner.run`` (sync or async) or a value. ``options``: those
    of :func:`lionctx.resolve_context` (``timeout`` defaults to 10 s). A wrong argument
    raises here, naming it.
    """

    def __init__(self, providers: Any, *, instructions: Any = None, run_context: Any = None,
                 **options: Any) -> None:
        if (instructions is not None and not isinstance(instructions, str)
                and not callable(instructions)):
            raise InvalidType("context_instructions: instructions must be a str, a callable "
                            f"(context, agent) or None, got {instructions!r}")
        super().__init__(providers, run_context=run_context, **options)
        self._base = instructions

    async def __call__(self, wrapper: Any, agent: Any) -> str:
        base = self._base
        if callable(base):
            base = base(wrapper, agent)
            if inspect.isawaitable(base):
                base = await base
        native = getattr(wrapper, "context", None)
        # The wrapper lives for one Runner.run: it keys the run and carries its report.
        resolution = await self.run_once(
            wrapper, latest_user_text(getattr(wrapper, "turn_input", None)), native, native)
        if base and resolution.text:
            return f"{base}\n\n{resolution.text}"
        return base or resolution.text


#: :class:`ContextInstructions` under the name the docs use.
context_instructions = ContextInstructions


def report(run: Any) -> Report | None:
    """The lionctx report of one run: pass what ``Runner.run`` or ``Runner.run_streamed``
    returned (or the run's ``RunContextWrapper``). ``None`` when no lionctx
    instructions ran in it; with several agents (handoffs), the last one resolved."""
    return tied_report(getattr(run, "context_wrapper", run))

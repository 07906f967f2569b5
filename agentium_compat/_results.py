"""What an agent's instructions receive (:class:`InstructionContext`) and what a run
returns (:class:`RunResult`). Public through :mod:`agentium_compat`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from lionctx._context import RunContext
from lionctx.models._base import ChatResponse
from lionctx.resolve import Resolution

__all__ = ["InstructionContext", "Instructions", "RunResult"]


class InstructionContext:
    """What an instructions function receives.

    ``context`` is the resolved context string (``""`` when there is none), by
    attribute and by key; ``input`` is the user's input; every
    :class:`~lionctx.RunContext` field (``user_id``/``userId``, ``tenant_id``/
    ``tenantId``, ``session_state``/``sessionState``, ``run_id``/``runId``,
    ``session_id``/``sessionId``, ``metadata`` ...) reads through.
    """

    __slots__ = ("agent", "context", "input", "run_context")

    def __init__(self, context: str, run_context: RunContext, input: str,  # noqa: A002
                 agent: str) -> None:
        self.context = context
        self.run_context = run_context
        self.input = input
        self.agent = agent

    def __getattr__(self, name: str) -> Any:
        # Reached only for names that are not set slots: the run context's fields
        # and views. Dunders and our own slots (unset while copy/pickle rebuild the
        # object) must fail plainly, else self.run_context would recurse here.
        if (name.startswith("__") and name.endswith("__")) or name in InstructionContext.__slots__:
            raise AttributeError(f"InstructionContext has no attribute {name!r}")
        try:
            run_context = object.__getattribute__(self, "run_context")
        except AttributeError:
            raise AttributeError(f"InstructionContext has no attribute {name!r}") from None
        try:
            return getattr(run_context, name)
        except AttributeError:
            raise AttributeError(f"InstructionContext has no attribute {name!r}") from None

    def __getitem__(self, key: str) -> Any:
        if key in ("context", "input", "agent"):
            return getattr(self, key)
        return self.run_context[key]

    def __contains__(self, key: object) -> bool:
        return key in ("context", "input", "agent") or key in self.run_context

    def get(self, key: str, default: Any = None) -> Any:
        """Mapping-style read that accepts either spelling."""
        try:
            return self[key]
        except KeyError:
            return default

    def __repr__(self) -> str:
        return (f"InstructionContext(agent={self.agent!r}, context=<{len(self.context)} chars>, "
                f"user_id={self.run_context.user_id!r}, tenant_id={self.run_context.tenant_id!r})")


Instructions = str | Callable[[InstructionContext], str | Awaitable[str]]


@dataclass
class RunResult:
    """The outcome of one :meth:`Agent.run`.

    ``output`` is the reply text, ``usage`` the server's usage dict (or ``None``),
    ``context_report`` the provider resolution (``None`` when ``context=`` was given
    or the agent has no providers), ``messages`` exactly the messages sent (after
    a context engine's selection). ``history`` is the conversation after this run
    without the system message: the given ``messages``, the input and the reply
    (each with its ``message_uid``), compacted when a context engine compressed it;
    pass it as ``messages=`` to continue the conversation.
    """

    output: str
    usage: dict[str, Any] | None
    context_report: Resolution | None
    messages: list[dict[str, Any]]
    context: str = ""
    system: str | None = None
    # Left out of the repr: its dependencies/session_state may hold clients and keys.
    run_context: RunContext = field(default_factory=RunContext, repr=False)
    response: ChatResponse | None = field(default=None, repr=False)
    agent: str = ""
    history: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def text(self) -> str:
        """Same as ``output``."""
        return self.output

    @property
    def contextReport(self) -> Resolution | None:  # noqa: N802 - agentium spelling
        return self.context_report

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (context text included, provider texts not)."""
        return {
            "agent": self.agent,
            "output": self.output,
            "usage": self.usage,
            "context": self.context,
            "context_report": (self.context_report.to_dict()
                               if self.context_report is not None else None),
            "messages": [dict(m) for m in self.messages],
            "run_id": self.run_context.run_id,
        }

    def to_json(self, **dumps_options: Any) -> str:
        """:meth:`to_dict` as a JSON string (what agentium users get from ``res.json``)."""
        return json.dumps(self.to_dict(), **dumps_options)

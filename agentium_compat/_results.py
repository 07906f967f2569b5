"""What an agent's instructions receive (:class:`InstructionContext`) and what a run
returns (:class:`RunResult`). Public through :mod:`agentium_compat`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from lionctx import Resolution
from lionctx.models import ChatResponse
from lionctx.providers._redact import (  # extension: the core's secret scrubbing
    MIN_SECRET,
    redact,
    redact_url_passwords,
)

from ._context import RunContext

__all__ = ["InstructionContext", "Instructions", "RunResult"]


class InstructionContext:
    """What an instructions function receives: ``context`` (the resolved context
    string, ``""`` when there is none) and ``input``, by attribute and by key, and every
    run-context field in both spellings (``user_id`` / ``userId`` ...)."""

    __slots__ = ("agent", "context", "input", "run_context")

    def __init__(self, context: str, run_context: RunContext, input: str,  # noqa: A002
                 agent: str) -> None:
        self.context = context
        self.run_context = RunContext.coerce(run_context)  # read in agentium's spellings
        self.input = input
        self.agent = agent

    def __getattr__(self, name: str) -> Any:
        # The run context's fields. Dunders and our own slots (unset while copy and
        # pickle rebuild the object) fail plainly, else self.run_context recurses here.
        if (name.startswith("__") and name.endswith("__")) or name in InstructionContext.__slots__:
            raise AttributeError(f"InstructionContext has no attribute {name!r}")
        try:
            return getattr(self.run_context, name)
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


#: Outcome fields that carry a provider's own words (an exception message).
_WORDS = ("error", "reason", "degradation_reason")


def _secrets_of(value: Any, depth: int = 0) -> list[str]:
    """The strings held in ``value``, in mappings and sequences a few levels deep."""
    if isinstance(value, str):
        return [value] if len(value) >= MIN_SECRET else []
    if depth >= 6:
        return []
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _secrets_of(v, depth + 1)]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [s for v in value for s in _secrets_of(v, depth + 1)]
    return []


def _scrubbed(report: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """``report`` (a Resolution's ``to_dict``) with the run context's held values and
    URL passwords taken out of each row's own words: a provider that raised with a
    token in its message must not hand it to whoever reads the result."""
    held = (ctx.dependencies, ctx.metadata, ctx.session_state, ctx.extra)
    secrets = sorted(set(_secrets_of(held)), key=len, reverse=True)
    for row in report.get("outcomes", ()):
        for key in _WORDS:
            words = row.get(key)
            if isinstance(words, str):
                row[key] = redact(redact_url_passwords(words), secrets)
    return report


#: RunResult's fields, in constructor order.
_FIELDS = ("output", "usage", "context_report", "messages", "context", "system",
           "run_context", "response", "agent", "history")
#: The fields its JSON view reads (a change to one refreshes the view).
_SHOWN = frozenset({"output", "usage", "context_report", "messages", "context",
                    "run_context", "agent"})


class RunResult(dict[str, Any]):
    """The outcome of one :meth:`Agent.run`.

    ``output`` is the reply text, ``usage`` the server's usage dict (or ``None``),
    ``context_report`` the provider resolution (``None`` when ``context=`` was given
    or the agent has no providers), ``messages`` exactly the messages sent (after
    a context engine's selection), ``run_id`` (``runId``) the run context's run id.
    ``history`` is the conversation after this run without the system message: the
    given ``messages``, the input and the reply (each with its ``message_uid``),
    compacted when a context engine compressed it; pass it as ``messages=`` to
    continue the conversation.

    A result is also a ``dict`` holding :meth:`to_dict`, the JSON view, so
    ``json.dumps(result)`` (agentium's ``res.json(result)``) and web encoders write
    it; it never holds the run context, the raw response or the history, and a
    report row's error message has the run context's values and URL passwords
    redacted. Setting an attribute (``result.output = ...``) refreshes the view.
    """

    __slots__ = _FIELDS
    output: str
    usage: dict[str, Any] | None
    context_report: Resolution | None
    messages: list[dict[str, Any]]
    context: str
    system: str | None
    run_context: RunContext
    response: ChatResponse | None
    agent: str
    history: list[dict[str, Any]]

    def __init__(self, output: str, usage: dict[str, Any] | None,
                 context_report: Resolution | None, messages: list[dict[str, Any]],
                 context: str = "", system: str | None = None,
                 run_context: RunContext | None = None, response: ChatResponse | None = None,
                 agent: str = "", history: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        values = (output, usage, context_report, messages, context, system,
                  RunContext() if run_context is None else run_context, response, agent,
                  [] if history is None else history)
        for name, value in zip(_FIELDS, values, strict=True):
            object.__setattr__(self, name, value)
        self._show()

    def _show(self) -> None:
        dict.clear(self)
        dict.update(self, self.to_dict())

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _SHOWN:
            self._show()

    def __repr__(self) -> str:
        # Not the run context (its dependencies may hold clients and keys), and of the
        # report only each row's fate: a provider's error message may quote a secret.
        report = (None if self.context_report is None else
                  [f"{o.name}: {o.status.value}" for o in self.context_report.outcomes])
        return (f"RunResult(output={self.output!r}, usage={self.usage!r}, "
                f"context_report={report!r}, messages={self.messages!r}, "
                f"context={self.context!r}, system={self.system!r}, agent={self.agent!r}, "
                f"run_id={self.run_id!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), tuple(getattr(self, name) for name in _FIELDS))

    def __copy__(self) -> RunResult:
        return type(self)(*(getattr(self, name) for name in _FIELDS))

    @property
    def text(self) -> str:
        """Same as ``output``."""
        return self.output

    @property
    def run_id(self) -> str:
        """The run context's run id (``runId``)."""
        return str(self.run_context.run_id)

    runId = run_id  # noqa: N815 - agentium spelling

    @property
    def contextReport(self) -> Resolution | None:  # noqa: N802 - agentium spelling
        """Same as ``context_report``."""
        return self.context_report

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (context text included, provider texts, the run
        context's dependencies, metadata and state not)."""
        return {
            "agent": self.agent,
            "output": self.output,
            "usage": self.usage,
            "context": self.context,
            "context_report": (_scrubbed(self.context_report.to_dict(), self.run_context)
                               if self.context_report is not None else None),
            "messages": [dict(m) for m in self.messages],
            "run_id": self.run_id,
        }

    def to_json(self, **dumps_options: Any) -> str:
        """:meth:`to_dict` as a JSON string: what ``json.dumps(result)`` writes."""
        return json.dumps(self.to_dict(), **dumps_options)

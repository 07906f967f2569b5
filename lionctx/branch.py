"""LionAGI-style ``Branch``: a conversation with lazily owned context providers.

A branch holds an optional system message, its durable message history (OpenAI
format dicts, each with a ``message_uid``), a model, and a :class:`RunContext`
that providers read. ``branch.providers`` builds a
:class:`~lionctx.ContextProviderRegistry` on first access; a branch that never
touches it builds no registry, imports no tokenizer and runs no gather.

Every operation runs the same turn (ADR-0008 D4, with LionAGI 0.36's call-local
design):

1. ``_context_for``: no registry or an empty one, nothing happens and the last
   report is left alone. A branch without a system message calls no provider and
   reports every name as skipped (unless ``inject_systemless=True``). Otherwise the
   registry gathers once for the turn's :class:`Instruction` and the report becomes
   this task's ``last_context_report``.
2. ``_prepare_request``: stored history plus the turn's messages, with the selected
   blocks rendered into a copy. The blocks live in that call's locals only; no
   branch attribute holds them, so concurrent turns cannot see each other's.
3. ``_send``: the one way out to the model, streaming or not.

Context engine (optional; see :mod:`lionctx.engines`). A branch runs no engine
unless ``context_engine=`` or ``engine_config=`` asks for one. With an engine, each
turn (chat, communicate, run, operate) also:

- starts the engine's session on the branch's first turn (``on_session_start``);
- after the providers' blocks are rendered, lets ``select_context`` replace the
  messages of each model request (each round of ``operate``), for that request only;
- reports each response's usage (``update_from_response``; the final usage when
  streaming);
- in ``operate``, offers the engine's tools to the model and answers calls to them
  with ``handle_tool_call``;
- after a turn that recorded messages, asks ``should_compress`` and, when due, runs
  ``compress`` in a worker thread and stores the compacted history (``chat`` records
  nothing, so it never compacts);
- ends with ``on_turn_complete`` (copies of the transcript, the last usage, and the
  turn's keywords), also when the model call failed (``failed=True``, then the
  error propagates) or the turn was cancelled or the stream closed early
  (``interrupted=True``).

The session ends with :meth:`Branch.end_session`, ``await branch.aclose()`` or
leaving ``async with branch:``; :meth:`Branch.reset` clears the history.
Hooks the engine did not override are skipped without copying anything.

Rendering. ``render="tags"`` (default): the request's system message is the system
text, a blank line, then each block in its ``<context name="...">`` tag, blocks
separated by blank lines. ``render="lionagi"`` builds LionAGI's fold byte for
byte (the value LionAGI 0.36 sends as its first instruction's ``Guidance``); the
message around it is lionctx's own, not LionAGI's YAML, and on a later turn
LionAGI's fold keeps the first instruction's guidance where lionctx's fold has none
(the guidance follows in the stored text): no system message is sent; the first user
message of the request starts with
exactly ``system + "\\n".join(blocks) + guidance`` (guidance is that instruction's
own guidance when it is the current one, else empty), followed by a blank line and
the instruction text. An instruction with guidance is stored as
``guidance + "\\n\\n" + instruction``, so without system or blocks both modes send
the stored text unchanged.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import json
import logging
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .context import RunContext, coerce_run_context
from .messages import (
    ensure_tool_call_uids,
    ensure_uid,
    message_text,
    new_uid,
    strip_persistence_fields,
    system_message,
    tool_message,
)
from .models.base import ChatModel, ChatResponse, ModelResponseError
from .models.tools import ActionResponse, Tool, as_tool, run_tool_call
from .registry import ContextProviderRegistry, ProviderReport
from .render import kept_in_order, render_lionagi, render_tagged

if TYPE_CHECKING:  # pragma: no cover
    from .engines.base import ContextEngine
    from .engines.host import EngineSession

# lionctx.engines is imported only by branches that have an engine: the plain path
# stays free of it. _host() caches the module (a function-level import per call costs).
_engine_host: Any = None


def _host() -> Any:
    global _engine_host
    if _engine_host is None:
        from .engines import host

        _engine_host = host
    return _engine_host

__all__ = ["Branch", "ContextBlock", "Instruction", "OperateResult", "RenderMode"]

logger = logging.getLogger(__name__)

RenderMode = Literal["tags", "lionagi"]
_RENDER_MODES = ("tags", "lionagi")


@dataclass(frozen=True)
class ContextBlock:
    """One selected provider block: the provider's name and its raw text."""

    name: str
    text: str


@dataclass
class Instruction:
    """What the user asks in one turn. Providers receive this object.

    ``instruction`` is the user's text (what fetch-style providers get as their
    query); ``guidance`` optional steering text that precedes it.
    """

    instruction: str
    guidance: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.instruction, str):
            raise TypeError(f"instruction must be a str, got {type(self.instruction).__name__}")
        if self.guidance is not None and not isinstance(self.guidance, str):
            raise TypeError(f"guidance must be a str or None, got {type(self.guidance).__name__}")

    @property
    def content(self) -> str:
        """The stored user text: ``guidance + "\\n\\n" + instruction``, or the instruction."""
        if self.guidance:
            return f"{self.guidance}\n\n{self.instruction}"
        return self.instruction

    def to_message(self) -> dict[str, Any]:
        """A new user message dict for this instruction."""
        return {"role": "user", "content": self.content}


@dataclass
class OperateResult:
    """What :meth:`Branch.operate` did.

    ``output`` is the final reply text (``None`` when the round limit stopped the
    loop). ``action_responses`` has one entry per tool call; an entry is ``None``
    when the call could not be run (unknown tool, bad arguments). ``messages`` are
    the messages the turn recorded. ``usage`` sums the numeric usage of every round.
    """

    output: str | None
    response: ChatResponse
    action_responses: list[ActionResponse | None] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    rounds: int = 0
    stopped: Literal["done", "max_rounds"] = "done"


def _as_instruction(instruction: str | Instruction, guidance: str | None) -> Instruction:
    if isinstance(instruction, Instruction):
        if guidance is not None:
            return Instruction(instruction.instruction, guidance)
        return instruction
    if not isinstance(instruction, str):
        raise TypeError(
            f"instruction must be a str or an Instruction, got {type(instruction).__name__}"
        )
    return Instruction(instruction, guidance)


def _as_block(block: Any) -> ContextBlock:
    if isinstance(block, ContextBlock):
        return block
    if isinstance(block, str):
        return ContextBlock("context", block)
    if isinstance(block, tuple) and len(block) == 2 and all(isinstance(x, str) for x in block):
        return ContextBlock(block[0], block[1])
    raise TypeError(f"a context block must be a ContextBlock, a str or a (name, text) "
                    f"tuple, got {block!r}")


def _prefix(fold: str, content: Any) -> Any:
    """Put the LionAGI fold in front of a user message's content."""
    if not fold:
        return content
    if isinstance(content, list):
        return [{"type": "text", "text": fold}, *content]
    text = content if isinstance(content, str) else message_text({"content": content})
    return f"{fold}\n\n{text}" if text else fold


def _add_usage(total: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    if not usage:
        return total
    out = dict(total or {})
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = out.get(key, 0) + value
    return out


@dataclass
class _EngineTurn:
    """One turn's context-engine bookkeeping; only exists when the branch has an engine."""

    session: EngineSession
    turn_id: str
    task_id: str | None
    #: False for chat: the turn stores nothing, so it never compacts.
    record: bool
    #: This turn's messages that are not stored (yet): they complete the transcript.
    pending: list[dict[str, Any]] = field(default_factory=list)
    api_calls: int = 0
    #: The last response's usage (None until a response arrives).
    usage: dict[str, Any] | None = None
    exit_reason: str = "completed"

    @property
    def engine(self) -> ContextEngine:
        return self.session.engine


def _task_key() -> Any:
    """The running asyncio task (reports are kept per task), or None elsewhere."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running asyncio loop (another backend, or sync code)
        return None


#: What ``Branch._engine_turn`` gives without an engine: nothing, at no cost.
_NO_ENGINE_TURN: AbstractAsyncContextManager[None] = nullcontext()


class Branch:
    """One conversation: system message, history, model, providers.

    ``system``: the system text (``None``: no system message). ``model``: any
    :class:`~lionctx.models.ChatModel`; by default an
    :class:`~lionctx.OpenAIChatModel` configured from the environment.
    ``messages``: initial history (copied; a leading system message is taken as the
    system). ``run_context``: a :class:`RunContext` or anything shaped like one;
    providers read it. ``inject_systemless``: call providers and inject their blocks
    even without a system message (the blocks then form a system message of their
    own; in lionagi mode they fold into the first user message). ``render``:
    ``"tags"`` or ``"lionagi"`` (see the module docs).

    ``context_engine``: ``None`` (default: no engine, no per-turn engine work), a
    :class:`~lionctx.ContextEngine` instance (used as is; the process-wide
    registered instance is shared, so the branch gets its ``clone_for_agent()``),
    or an engine name such as ``"compressor"`` or a plugin's name.
    ``engine_config``: a ``context`` configuration (a mapping, its ``context``
    section, or a YAML/TOML path) giving ``engine`` (default ``"compressor"`` once a
    configuration is given), ``plugin_paths`` and ``compressor`` settings; an
    explicit ``context_engine`` name wins over its ``engine``. The built-in
    compressor summarizes with this branch's model (a :class:`~lionctx.ContextCompressor`
    instance without a model or summarizer gets it too).

    ``dedupe_history``: skip a provider's block (row ``skipped``, reason
    ``duplicate of message N``) when an earlier message of this branch already
    holds its text verbatim.
    """

    def __init__(
        self,
        system: str | None = None,
        model: ChatModel | None = None,
        *,
        messages: Iterable[Mapping[str, Any]] | None = None,
        run_context: Any = None,
        inject_systemless: bool = False,
        render: RenderMode = "tags",
        name: str | None = None,
        context_engine: ContextEngine | str | None = None,
        engine_config: Any = None,
        dedupe_history: bool = False,
    ) -> None:
        if system is not None and not isinstance(system, str):
            raise TypeError(f"system must be a str or None, got {type(system).__name__}")
        if render not in _RENDER_MODES:
            raise ValueError(f"render must be one of {_RENDER_MODES}, got {render!r}")
        if not isinstance(inject_systemless, bool):
            raise TypeError(f"inject_systemless must be a bool, got {inject_systemless!r}")
        if model is None:
            from .models.openai_chat import OpenAIChatModel

            model = OpenAIChatModel()
        elif not (callable(getattr(model, "complete", None))
                  and callable(getattr(model, "stream", None))):
            raise TypeError(f"model must have complete() and stream() (a ChatModel), "
                            f"got {type(model).__name__}")
        self.name = name
        self.model: ChatModel = model
        self.render: RenderMode = render
        self.inject_systemless = inject_systemless
        #: issue 13: skip a block whose text an earlier message already holds verbatim.
        self.dedupe_history = bool(dedupe_history)
        self.run_context: RunContext = coerce_run_context(run_context)
        self._messages: list[dict[str, Any]] = []
        self.messages = messages if messages is not None else []
        if system is not None:
            if self.system is not None:
                raise ValueError("system given twice: as system= and as the first of messages=")
            self.system = system
        # LionAGI's private attributes: no registry until someone asks for one.
        self._context_providers: ContextProviderRegistry | None = None
        self._last_context_report: ProviderReport | None = None
        # Each task's own last report, keyed weakly by the task: the entry goes when
        # the task ends or when this branch goes. O(1) per turn, whatever the number
        # of branches a task serves.
        self._task_reports: weakref.WeakKeyDictionary[Any, ProviderReport] = (
            weakref.WeakKeyDictionary())
        self.last_response: ChatResponse | None = None
        """The most recent model reply on this branch (any task; last writer wins)."""
        self._engine_session: EngineSession | None = None
        if context_engine is not None or engine_config is not None:
            from .engines.host import EngineSession, summary_model
            from .engines.loader import resolve_context_engine

            engine = resolve_context_engine(context_engine, engine_config,
                                            model=summary_model(model))
            if engine is not None:
                self._engine_session = EngineSession(engine)

    def __repr__(self) -> str:
        providers = len(self._context_providers) if self._context_providers is not None else 0
        engine = f", engine={self._engine_label()!r}" if self._engine_session is not None else ""
        return (f"Branch(name={self.name!r}, messages={len(self._messages)}, "
                f"providers={providers}, render={self.render!r}{engine})")

    def _engine_label(self) -> str:
        try:
            return str(self._engine_session.engine.name)  # type: ignore[union-attr]
        except Exception:
            return type(self._engine_session.engine).__name__  # type: ignore[union-attr]

    # -- state -------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The stored history (system message first, if any). Never holds a context block."""
        return self._messages

    @messages.setter
    def messages(self, value: Iterable[Mapping[str, Any]]) -> None:
        if isinstance(value, (str, bytes, Mapping)):
            raise TypeError(f"messages must be a list of message dicts, got {type(value).__name__}")
        stored = []
        for i, msg in enumerate(value):
            if not isinstance(msg, Mapping):
                raise TypeError(f"message {i} must be a dict, got {type(msg).__name__}: {msg!r}")
            stored.append(ensure_uid(copy.deepcopy(dict(msg))))
        self._messages = stored

    @property
    def system(self) -> str | None:
        """The system text, or ``None`` when the branch has no system message."""
        msgs = self._messages
        if msgs and msgs[0].get("role") == "system":
            return message_text(msgs[0])
        return None

    @system.setter
    def system(self, value: str | None) -> None:
        has = bool(self._messages) and self._messages[0].get("role") == "system"
        if value is None:
            if has:
                del self._messages[0]
            return
        if not isinstance(value, str):
            raise TypeError(f"system must be a str or None, got {type(value).__name__}")
        if has:
            self._messages[0]["content"] = value  # same message, new text: uid kept
        else:
            self._messages.insert(0, ensure_uid(system_message(value)))

    @property
    def providers(self) -> ContextProviderRegistry:
        """This branch's provider registry, created (budget 2000) on first access."""
        if self._context_providers is None:
            self._context_providers = ContextProviderRegistry()
        return self._context_providers

    @property
    def context_engine(self) -> ContextEngine | None:
        """This branch's context engine, or ``None`` (the default) when it has none."""
        session = self._engine_session
        return session.engine if session is not None else None

    @property
    def last_context_report(self) -> ProviderReport | None:
        """The report of this task's last provider pass on this branch.

        A task that ran no pass here sees the branch's most recent pass from any
        task (last writer wins); ``None`` before any pass. Turns on a branch with
        no registered provider leave it unchanged.
        """
        key = _task_key()
        if key is not None:
            report = self._task_reports.get(key)
            if report is not None:
                return report
        return self._last_context_report

    def _set_report(self, report: ProviderReport) -> None:
        key = _task_key()
        if key is not None:
            self._task_reports[key] = report
        self._last_context_report = report

    def _store(self, msg: dict[str, Any]) -> dict[str, Any]:
        ensure_uid(msg)
        self._messages.append(msg)
        return msg

    def clone(self, *, with_providers: bool = False) -> Branch:
        """A new branch with copies of the history (uids kept), same model and settings.

        The run context is a shallow copy (same ids; ``session_state`` shared).
        Providers are not copied (as in LionAGI) unless ``with_providers=True``, which
        gives the clone its own registry with the same entries and fresh stats.
        """
        new = Branch(model=self.model, messages=copy.deepcopy(self._messages),
                     run_context=dataclasses.replace(self.run_context),
                     inject_systemless=self.inject_systemless, render=self.render,
                     name=self.name, dedupe_history=self.dedupe_history)
        if with_providers and self._context_providers is not None:
            new._context_providers = self._context_providers.copy()
        if self._engine_session is not None:
            from .engines.host import EngineSession, summary_model
            from .engines.loader import clone_engine

            # Its own engine (clone_for_agent) and its own session.
            engine = clone_engine(self._engine_session.engine, model=summary_model(self.model))
            new._engine_session = EngineSession(engine)
        return new

    # -- engine session ------------------------------------------------------------
    def reset(self) -> None:
        """Clear the history, keeping the system message.

        With a context engine: the current session ends (``on_session_end`` with the
        history being cleared), then ``on_session_reset``; the next turn starts a new
        session. ``last_response`` is cleared; providers and their report are kept.
        """
        session = self._engine_session
        if session is not None:
            session.reset(self._messages)
        msgs = self._messages
        self._messages = [msgs[0]] if msgs and msgs[0].get("role") == "system" else []
        self.last_response = None

    def end_session(self) -> None:
        """End the context engine's session (``on_session_end`` with copies of the
        history). A later turn starts a new session. Does nothing without an engine
        or before the first turn; the branch and its history stay usable."""
        session = self._engine_session
        if session is not None:
            session.end(self._messages)

    async def aclose(self) -> None:
        """:meth:`end_session` in a worker thread (an engine may flush to disk or a
        database there). The model is shared, so it is not closed."""
        if self._engine_session is not None and self._engine_session.active:
            await anyio.to_thread.run_sync(self.end_session)

    async def __aenter__(self) -> Branch:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def _engine_turn(self, *, record: bool = True) -> AbstractAsyncContextManager[
            _EngineTurn | None]:
        """The engine's view of one turn: ``async with`` gives the turn's state, or None
        (and nothing happens) without an engine.

        On normal exit: compaction (when ``record``), then ``on_turn_complete``. When
        the body raises, ``on_turn_complete`` reports the failure or interruption and
        the exception propagates unchanged.
        """
        session = self._engine_session
        if session is None:
            return _NO_ENGINE_TURN
        return self._run_engine_turn(session, record)

    @asynccontextmanager
    async def _run_engine_turn(self, session: EngineSession, record: bool) -> AsyncIterator[
            _EngineTurn]:
        session.start(self.run_context.session_id)
        turn = _EngineTurn(session, new_uid(), self.run_context.run_id, record)
        try:
            yield turn
            if record:
                await self._compact(turn)
        except Exception:
            self._turn_complete(turn, failed=True, exit_reason="error")
            raise
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            self._turn_complete(turn, interrupted=True,
                                exit_reason="cancelled" if cancelled else "interrupted")
            raise
        self._turn_complete(turn, exit_reason=turn.exit_reason)

    def _turn_complete(self, turn: _EngineTurn, *, failed: bool = False,
                       interrupted: bool = False, exit_reason: str) -> None:
        host = _host()
        engine = turn.engine
        if not host.overrides(engine, "on_turn_complete"):
            return  # nothing built for an engine that does not observe turns
        host.notify_turn_complete(
            engine, [*self._messages, *turn.pending], turn.usage,
            turn_id=turn.turn_id, task_id=turn.task_id, api_call_count=turn.api_calls,
            interrupted=interrupted, failed=failed, turn_exit_reason=exit_reason,
        )

    async def _compact(self, turn: _EngineTurn) -> None:
        """``should_compress`` here, then ``compress`` in a worker thread when due."""
        host = _host()
        engine = turn.engine
        counts = host.usage_counts(turn.usage)
        prompt_tokens = counts[0] if counts is not None else None
        if not host.compression_due(engine, prompt_tokens):
            return
        snapshot = list(self._messages)
        compacted = await anyio.to_thread.run_sync(
            functools.partial(host.maybe_compress, engine, snapshot, prompt_tokens, force=True))
        if compacted is None:
            return
        current = self._messages
        # Another task may have stored messages meanwhile: keep them after the
        # compacted prefix; if the prefix itself changed, the compaction is stale.
        if len(current) < len(snapshot) or any(
                a is not b for a, b in zip(snapshot, current, strict=False)):
            logger.warning("branch %r history changed while context engine %r compacted it; "
                           "compaction discarded", self.name, self._engine_label())
            return
        self._messages = [*compacted, *current[len(snapshot):]]

    # -- the turn ----------------------------------------------------------------
    async def _context_for(self, instruction: Instruction) -> tuple[ContextBlock, ...]:
        """Run the provider pass for one turn; return the selected blocks.

        Reads the private registry so the zero-provider path never creates one.
        """
        registry = self._context_providers
        if not registry:
            return ()
        if self.system is None and not self.inject_systemless:
            self._set_report(registry.skipped_report())
            return ()
        report = await registry.gather(self, instruction, tagged=self.render == "tags")
        self._set_report(report)
        if self.render == "tags":  # issue 13: stable blocks first, then volatile ones
            # A kept (fired) outcome always has text; the test only narrows.
            return tuple(ContextBlock(o.name, o.text) for o in kept_in_order(report.outcomes)
                         if o.text is not None)
        return tuple(ContextBlock(row["provider_name"], text)
                     for row, text in zip(report.fired, report.blocks, strict=False))

    async def _prepare_request(
        self,
        instruction: Instruction | None,
        blocks: Sequence[ContextBlock] = (),
        *,
        turn: Sequence[Mapping[str, Any]] = (),
        select: bool = True,
    ) -> list[dict[str, Any]]:
        """The one request builder: messages -> the messages one model call sends.

        Stored history, then the instruction, then ``turn`` (this turn's tool
        rounds), all as fresh copies without persistence-only fields; ``blocks``
        are rendered into the copy only. Then, with ``select`` and an engine that
        implements it, ``select_context`` sees that assembled request and may
        replace it for this call (the stored history is its
        ``conversation_messages``, the instruction its ``incoming_message``).
        """
        request = self._render_request(instruction, blocks, turn)
        session = self._engine_session
        if not select or session is None:
            return request
        host = _host()
        if not host.overrides(session.engine, "select_context"):
            return request
        selected: list[dict[str, Any]] = await host.apply_select_context_async(
            session.engine, request, conversation_messages=self._messages,
            incoming_message=instruction.to_message() if instruction is not None else None)
        if selected is request:
            return request
        # An engine may build its selection from uid-carrying history: never send those.
        selected = strip_persistence_fields(selected)
        if self.render == "lionagi" and (blocks or self.system is not None):
            # In lionagi mode the system text and blocks live in the first user
            # message: it is the system prefix there, and stays as it was.
            first = next((m for m in request if m.get("role") == "user"), None)
            kept = next((m for m in selected if m.get("role") == "user"), None)
            if first is not None and kept != first:
                logger.warning("context engine %r select_context changes the first user message, "
                               "which holds the system text in lionagi mode; using the "
                               "unmodified request", self._engine_label())
                return request
        return selected

    def _render_request(
        self,
        instruction: Instruction | None,
        blocks: Sequence[ContextBlock],
        turn: Sequence[Mapping[str, Any]],
    ) -> list[dict[str, Any]]:
        msgs = self._messages
        has_system = bool(msgs) and msgs[0].get("role") == "system"
        system = message_text(msgs[0]) if has_system else None
        history = msgs[1:] if has_system else msgs
        current = [instruction.to_message()] if instruction is not None else []
        body = strip_persistence_fields([*history, *current, *turn])
        if self.render == "tags":
            parts = [system] if system else []
            if blocks:
                parts.append(render_tagged((b.name, b.text) for b in blocks))
            if system is None and not blocks:
                return body
            return [system_message("\n\n".join(parts)), *body]
        # lionagi: system + "\n".join(blocks) + guidance, folded into the first instruction.
        texts = [b.text for b in blocks]
        target = next((i for i, m in enumerate(body) if m.get("role") == "user"), None)
        if target is None:
            fold = render_lionagi(system or "", texts, "")
            return [system_message(fold), *body] if fold else body
        if instruction is not None and target == len(history):
            fold = render_lionagi(system or "", texts, instruction.guidance or "")
            content: Any = instruction.instruction
        else:
            fold = render_lionagi(system or "", texts, "")
            content = body[target].get("content")
        if fold:
            body[target]["content"] = _prefix(fold, content) if content else fold
        return body

    async def _send(
        self,
        request: list[dict[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        stream: bool = False,
        engine_turn: _EngineTurn | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[str | ChatResponse, None]:
        """The one way out to the model. Yields text deltas when streaming, then
        always the :class:`ChatResponse` last. With ``engine_turn``, the call is
        counted and the response's usage goes to the engine."""
        if engine_turn is not None:
            engine_turn.api_calls += 1
        if not stream:
            response = await self.model.complete(request, tools=tools, **kwargs)
        else:
            chat_stream = self.model.stream(request, tools=tools, **kwargs)
            try:
                async for delta in chat_stream:
                    yield delta
            finally:
                await chat_stream.aclose()
            streamed = chat_stream.response
            if streamed is None:
                raise ModelResponseError("the model stream ended without a response")
            response = streamed
        self.last_response = response
        if engine_turn is not None:
            engine_turn.usage = response.usage
            _host().after_response(engine_turn.engine, response.usage)
        yield response

    async def _complete(self, request: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        response: str | ChatResponse | None = None
        async with aclosing(self._send(request, **kwargs)) as events:
            async for event in events:
                response = event
        # Not streaming, _send yields one event, the model's response (or raises).
        assert response is not None and not isinstance(response, str)
        return response

    async def _exchange(self, instruction: Instruction, engine_turn: _EngineTurn | None = None,
                        **kwargs: Any) -> tuple[list[dict[str, Any]], ChatResponse]:
        """One non-streaming request without recording: (request sent, reply)."""
        blocks = await self._context_for(instruction)
        request = await self._prepare_request(instruction, blocks)
        return request, await self._complete(request, engine_turn=engine_turn, **kwargs)

    async def _communicate(self, instruction: Instruction, **kwargs: Any) -> tuple[
            list[dict[str, Any]], ChatResponse]:
        """One recorded turn: (request sent, reply); the engine sees the whole turn."""
        async with self._engine_turn() as eturn:
            user = instruction.to_message()
            if eturn is not None:
                eturn.pending = [user]
            request, response = await self._exchange(instruction, eturn, **kwargs)
            self._store(user)
            self._store(response.to_message())
            if eturn is not None:
                eturn.pending = []
        return request, response

    # -- operations ----------------------------------------------------------------
    def build_request(
        self,
        instruction: str | Instruction,
        *,
        blocks: Iterable[ContextBlock | str | tuple[str, str]] = (),
        guidance: str | None = None,
    ) -> list[dict[str, Any]]:
        """The messages one call would send with these explicit ``blocks``.

        Calls no provider, runs no context engine (no ``select_context``) and
        records nothing: a way to see the rendering.
        """
        return self._render_request(_as_instruction(instruction, guidance),
                                    tuple(_as_block(b) for b in blocks), ())

    async def chat(
        self, instruction: str | Instruction, *, guidance: str | None = None,
        **kwargs: Any,
    ) -> ChatResponse:
        """Send one instruction with this turn's context; record nothing.

        Extra keywords (``temperature``...) go to the model. With a context engine
        this is still a turn (selection, usage, ``on_turn_complete`` with the stored
        history plus this instruction and reply), but it never compacts: chat does
        not touch the stored history.
        """
        ins = _as_instruction(instruction, guidance)
        async with self._engine_turn(record=False) as eturn:
            if eturn is not None:
                eturn.pending = [ins.to_message()]
            _, response = await self._exchange(ins, eturn, **kwargs)
            if eturn is not None:
                eturn.pending.append(response.to_message())
        return response

    async def communicate(
        self, instruction: str | Instruction, *, guidance: str | None = None,
        **kwargs: Any,
    ) -> str:
        """Send one instruction; record it and the reply after the call; return the text."""
        _, response = await self._communicate(_as_instruction(instruction, guidance), **kwargs)
        return response.text

    async def run(
        self, instruction: str | Instruction, *, guidance: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[str]:
        """Stream the reply as text deltas.

        The instruction is recorded before streaming starts (as in LionAGI); the
        reply is recorded when the stream ends normally. ``branch.last_response``
        then holds the whole reply with its usage. With a context engine, the
        turn's end (compaction, ``on_turn_complete``) runs before the iteration
        finishes; closing the stream early reports the turn as interrupted.
        """
        ins = _as_instruction(instruction, guidance)
        async with self._engine_turn() as eturn:
            blocks = await self._context_for(ins)
            request = await self._prepare_request(ins, blocks)
            self._store(ins.to_message())
            response: ChatResponse | None = None
            async with aclosing(self._send(request, stream=True, engine_turn=eturn,
                                           **kwargs)) as events:
                async for event in events:
                    if isinstance(event, ChatResponse):
                        response = event
                    else:
                        yield event
            if response is not None:
                self._store(response.to_message())

    async def operate(
        self,
        instruction: str | Instruction,
        *,
        tools: Sequence[Any],
        guidance: str | None = None,
        max_rounds: int = 10,
        **kwargs: Any,
    ) -> OperateResult:
        """Send an instruction with tools and run the tool-call loop.

        ``tools``: Python callables (sync or async), :class:`Tool` objects, or
        OpenAI function-tool specs (a spec without a function is described to the
        model; a call to it is answered with an error and has no action response).
        Context is gathered once and injected into every round's request. The
        instruction, tool calls, tool results and final reply are recorded when the
        loop ends. When at least one action response is not ``None`` and the branch
        has registered providers, ``providers.gather_writeback(branch, responses)``
        runs exactly once, before this returns.

        With a context engine, its tools (``get_tool_schemas``) are offered after
        the user's, and a call to one is answered by its ``handle_tool_call`` (in a
        worker thread; its action response's ``output`` is the result text). A user
        tool with the same name wins; the engine's is left out with a warning.
        ``select_context`` runs again for every round's request.
        """
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
            raise TypeError(f"tools must be a list of callables, Tools or specs, got {tools!r}")
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ValueError(f"max_rounds must be an int >= 1, got {max_rounds!r}")
        by_name: dict[str, Tool] = {}
        for obj in tools:
            tool = as_tool(obj)
            if tool.name in by_name:
                raise ValueError(f"two tools are named {tool.name!r}")
            by_name[tool.name] = tool
        specs = [t.spec() for t in by_name.values()]
        ins = _as_instruction(instruction, guidance)
        async with self._engine_turn() as eturn:
            engine_names = self._offer_engine_tools(eturn, by_name, specs)
            blocks = await self._context_for(ins)
            user = ins.to_message()
            turn: list[dict[str, Any]] = []
            pending = eturn.pending if eturn is not None else []
            pending.append(user)
            actions: list[ActionResponse | None] = []
            usage: dict[str, Any] | None = None
            response: ChatResponse | None = None
            rounds = 0
            stopped: Literal["done", "max_rounds"] = "done"
            while True:
                request = await self._prepare_request(ins, blocks, turn=turn)
                response = await self._complete(request, tools=specs or None,
                                                engine_turn=eturn, **kwargs)
                rounds += 1
                usage = _add_usage(usage, response.usage)
                if not response.tool_calls:
                    turn.append(ensure_uid(response.to_message()))
                    pending.append(turn[-1])
                    break
                assistant = ensure_uid(response.to_message())
                uids = ensure_tool_call_uids(assistant)
                turn.append(assistant)
                pending.append(assistant)
                for call in response.tool_calls:
                    name = (call.get("function") or {}).get("name")
                    if eturn is not None and name in engine_names:
                        action, content = await self._run_engine_tool(eturn, call)
                    else:
                        chosen = by_name.get(name) if isinstance(name, str) else None
                        action, content = await run_tool_call(chosen, call)
                    actions.append(action)
                    result = ensure_uid(tool_message(call.get("id") or "", content))
                    if call.get("id") in uids:
                        result["_tool_call_uid"] = uids[call["id"]]
                    turn.append(result)
                    pending.append(result)
                if rounds >= max_rounds:
                    stopped = "max_rounds"
                    break
            self._store(user)
            recorded = [user]
            recorded.extend(self._store(m) for m in turn)
            pending.clear()
            if eturn is not None:
                eturn.exit_reason = "completed" if stopped == "done" else "max_rounds"
            responses = [a for a in actions if a is not None]
            if responses and self._context_providers:
                await self._context_providers.gather_writeback(self, responses)
        output = response.content if stopped == "done" else None
        return OperateResult(output, response, actions, recorded, usage, rounds, stopped)

    def _offer_engine_tools(self, eturn: _EngineTurn | None, user_tools: Mapping[str, Tool],
                            specs: list[dict[str, Any]]) -> frozenset[str]:
        """Append the engine's function tools to ``specs``; return their names."""
        if eturn is None:
            return frozenset()
        names: set[str] = set()
        for spec in _host().engine_tools(eturn.engine):
            name = spec["function"]["name"]
            if name in user_tools or name in names:
                logger.warning("context engine %r tool %r is left out: %s", self._engine_label(),
                               name, "a user tool has that name" if name in user_tools
                               else "the engine offers it twice")
                continue
            names.add(name)
            specs.append(spec)
        return frozenset(names)

    async def _run_engine_tool(self, eturn: _EngineTurn, call: Mapping[str, Any]) -> tuple[
            ActionResponse | None, str]:
        """Answer one call to an engine tool: (action response, tool message text)."""
        fn_part = call.get("function") or {}
        name = fn_part.get("name") or ""
        call_id = call.get("id") or ""
        raw = fn_part.get("arguments")
        content = await anyio.to_thread.run_sync(functools.partial(
            _host().dispatch_engine_tool, eturn.engine, name, raw, turn_id=eturn.turn_id,
            task_id=eturn.task_id, tool_call_id=call_id))
        try:
            args = json.loads(raw) if isinstance(raw, str) and raw else (raw or {})
        except ValueError:
            args = None
        if not isinstance(args, dict):
            return None, content  # not run: dispatch told the model why
        return ActionResponse(call_id, name, args, content), content

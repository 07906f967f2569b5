"""LionAGI-style ``Branch``: a conversation with lazily owned context providers.

Every operation (chat, communicate, run, operate, prepare) is one turn
(:class:`lionctx._turn.Turn`, which ``Agent`` composes too): the provider pass for
the turn's instruction, the request built once with the selected blocks rendered
into a copy (the blocks never enter the stored history), then the model. A branch
without a system message calls no provider (``inject_systemless=True`` to call
them); a branch that never touches ``providers`` builds no registry and imports no
tokenizer. An optional context engine joins each turn (``docs/engines.md``).
``render="tags"`` puts ``<context name="...">`` blocks after the system text;
``render="lionagi"`` sends LionAGI 0.36's fold byte for byte (``docs/faces.md``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio

from ._context import RunContext, coerce_run_context
from ._exceptions import InvalidType, InvalidValue
from ._messages import ensure_uid, system_message
from ._request import build_request
from ._task_local import TaskLocal
from ._turn import Conversation, Turn, chat_model, copy_messages
from ._values import (
    RENDER_MODES,
    ContextBlock,
    Instruction,
    OperateResult,
    RenderMode,
    as_block,
    as_instruction,
    tools_by_name,
)
from .models._base import ChatModel, ChatResponse
from .registry import ContextProviderRegistry, ProviderReport

if TYPE_CHECKING:  # pragma: no cover
    from .engines._base import ContextEngine
    from .engines._session import EngineSession

__all__ = ["Branch", "ContextBlock", "Instruction", "OperateResult", "RenderMode"]

from ._log import logger_for

logger = logger_for(__name__)


class Branch:
    """One conversation: system message, history, model, providers.

    ``system``: the system text (``None``: no system message). ``model``: any
    :class:`~lionctx.models.ChatModel` (``complete``; ``stream`` too for
    :meth:`run`); by default an :class:`~lionctx.OpenAIChatModel` configured from
    the environment.
    ``messages``: initial history (copied; a leading system message is taken as the
    system). ``run_context``: a :class:`RunContext` or anything shaped like one;
    providers read it. ``inject_systemless``: call providers and inject their blocks
    even without a system message (the blocks then form a system message of their
    own; in lionagi mode they fold into the first user message). ``render``:
    ``"tags"`` or ``"lionagi"`` (see the module docs).

    ``context_engine``: ``None`` (default: no engine), a
    :class:`~lionctx.engines.ContextEngine` (a registered shared instance is cloned
    for the branch) or an engine name (``"compressor"``, a plugin's); ``engine_config``:
    a ``context`` configuration (mapping, section, or YAML/TOML path); see
    ``docs/engines.md``. The built-in compressor summarizes with this branch's model.

    ``dedupe_history``: skip a provider's block (row ``skipped``, reason
    ``duplicate of message N``, N its position in :attr:`messages`) when the system
    side of this branch already said it as a whole block: an assistant, tool or
    later system message, never a user's (see ``docs/dedupe.md``; each turn reads
    only the messages new since the previous one).
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
            raise InvalidType(f"system must be a str or None, got {type(system).__name__}")
        if render not in RENDER_MODES:
            raise InvalidValue(f"render must be one of {RENDER_MODES}, got {render!r}")
        if not isinstance(inject_systemless, bool):
            raise InvalidType(f"inject_systemless must be a bool, got {inject_systemless!r}")
        model = chat_model(model)
        self.name = name
        self.model: ChatModel = model
        self.render: RenderMode = render
        self.inject_systemless = inject_systemless
        #: skip a block the system side of this conversation already said (whole blocks).
        self.dedupe_history = bool(dedupe_history)
        self.run_context: RunContext = coerce_run_context(run_context)
        self._conversation = Conversation(name=name)
        self.messages = messages if messages is not None else []
        if system is not None:
            if self.system is not None:
                raise InvalidValue("system given twice: as system= and as the first of messages=")
            self.system = system
        # LionAGI's private attributes (_last_context_report below): no registry
        # until someone asks for one.
        self._context_providers: ContextProviderRegistry | None = None
        # Each task's own last report (the last from any task as the fallback).
        self._reports: TaskLocal[ProviderReport] = TaskLocal()
        self._engine_session: EngineSession | None = None
        if context_engine is not None or engine_config is not None:
            from .engines._session import open_session

            self._engine_session = open_session(context_engine, engine_config, model=model)

    def __repr__(self) -> str:
        providers = len(self._context_providers) if self._context_providers is not None else 0
        session = self._engine_session
        engine = f", engine={session.label!r}" if session is not None else ""
        return (f"Branch(name={self.name!r}, messages={len(self.messages)}, "
                f"providers={providers}, render={self.render!r}{engine})")

    # -- state -------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The stored history (system message first, if any). Never holds a context block."""
        return self._conversation.messages

    @messages.setter
    def messages(self, value: Iterable[Mapping[str, Any]]) -> None:
        self._conversation.messages = copy_messages(value)

    @property
    def system(self) -> str | None:
        """The system text, or ``None`` when the branch has no system message."""
        return self._conversation.system

    @system.setter
    def system(self, value: str | None) -> None:
        msgs = self._conversation.messages
        has = bool(msgs) and msgs[0].get("role") == "system"
        if value is None:
            if has:
                del msgs[0]
            return
        if not isinstance(value, str):
            raise InvalidType(f"system must be a str or None, got {type(value).__name__}")
        if has:
            msgs[0]["content"] = value  # same message, new text: uid kept
        else:
            msgs.insert(0, ensure_uid(system_message(value)))

    @property
    def last_response(self) -> ChatResponse | None:
        """The most recent model reply on this branch (any task; last writer wins)."""
        return self._conversation.last_response

    @last_response.setter
    def last_response(self, value: ChatResponse | None) -> None:
        self._conversation.last_response = value

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
        return self._reports.get()

    @property
    def _last_context_report(self) -> ProviderReport | None:
        # LionAGI's name for the branch-level report (the last pass from any task).
        return self._reports.last

    def clone(self, *, with_providers: bool = False) -> Branch:
        """A new branch with copies of the history (uids kept), same model and settings.

        The run context is a shallow copy (same ids; ``session_state`` shared).
        Providers are not copied (as in LionAGI) unless ``with_providers=True``, which
        gives the clone its own registry with the same entries and fresh stats.
        """
        new = Branch(model=self.model, messages=copy.deepcopy(self.messages),
                     run_context=dataclasses.replace(self.run_context),
                     inject_systemless=self.inject_systemless, render=self.render,
                     name=self.name, dedupe_history=self.dedupe_history)
        if with_providers and self._context_providers is not None:
            new._context_providers = self._context_providers.copy()
        if self._engine_session is not None:
            # Its own engine (clone_for_agent) and its own session.
            new._engine_session = self._engine_session.clone(self.model)
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
            session.reset(self.messages)
        msgs = self.messages
        self._conversation.messages = [msgs[0]] if msgs and msgs[0].get("role") == "system" else []
        self.last_response = None

    def end_session(self) -> None:
        """End the context engine's session (``on_session_end`` with copies of the
        history). A later turn starts a new session. Does nothing without an engine
        or before the first turn; the branch and its history stay usable."""
        session = self._engine_session
        if session is not None:
            session.end(self.messages)

    async def aclose(self) -> None:
        """:meth:`end_session` in a worker thread (an engine may flush to disk or a
        database there). The model is shared, so it is not closed."""
        if self._engine_session is not None and self._engine_session.active:
            await anyio.to_thread.run_sync(self.end_session)

    async def __aenter__(self) -> Branch:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    # -- the turn ----------------------------------------------------------------
    def _turn(self, instruction: Instruction, *, record: bool = True) -> Turn:
        return Turn(self._conversation, self.model, instruction, session=self._engine_session,
                    run_context=self.run_context, render=self.render, record=record)

    async def _gather(self, turn: Turn) -> None:
        """The provider pass for ``turn`` (no registry is made); its report is this task's."""
        report = await turn.gather(self._context_providers, self,
                                   inject=self.system is not None or self.inject_systemless)
        if report is not None:
            self._reports.set(report)

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
        return build_request(self.messages, as_instruction(instruction, guidance),
                             tuple(as_block(b) for b in blocks), (), self.render)

    async def prepare(
        self, instruction: str | Instruction, *, guidance: str | None = None,
    ) -> list[dict[str, Any]]:
        """The messages a call would send now, without sending or recording anything.

        Runs the provider pass (its report becomes ``last_context_report``) and the
        context engine's ``select_context`` as a turn would; starts no engine session
        and reports no turn to the engine.
        """
        turn = self._turn(as_instruction(instruction, guidance), record=False)
        await self._gather(turn)
        return await turn.prepare()

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
        async with self._turn(as_instruction(instruction, guidance), record=False) as turn:
            await self._gather(turn)
            return await turn.exchange(**kwargs)

    async def communicate(
        self, instruction: str | Instruction, *, guidance: str | None = None,
        **kwargs: Any,
    ) -> str:
        """Send one instruction; record it and the reply after the call; return the text."""
        async with self._turn(as_instruction(instruction, guidance)) as turn:
            await self._gather(turn)
            response = await turn.exchange(**kwargs)
            turn.store()
        return response.text

    async def run(
        self, instruction: str | Instruction, *, guidance: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[str]:
        """Stream the reply as text deltas (the model must have ``stream``).

        The instruction is recorded before streaming starts (as in LionAGI); the
        reply is recorded when the stream ends normally. ``branch.last_response``
        then holds the whole reply with its usage. With a context engine, the
        turn's end (compaction, ``on_turn_complete``) runs before the iteration
        finishes; closing the stream early reports the turn as interrupted.
        """
        ins = as_instruction(instruction, guidance)
        if not callable(getattr(self.model, "stream", None)):
            raise InvalidType(f"model must have stream() to stream a reply, got "
                            f"{type(self.model).__name__}")
        async with self._turn(ins) as turn:
            await self._gather(turn)
            request = await turn.prepare()
            turn.store()
            async with aclosing(turn.stream(request, **kwargs)) as deltas:
                async for delta in deltas:
                    yield delta
            if turn.response is not None:
                turn.add(turn.response.to_message())
                turn.store()

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
        by_name = tools_by_name(tools)
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise InvalidValue(f"max_rounds must be an int >= 1, got {max_rounds!r}")
        async with self._turn(as_instruction(instruction, guidance)) as turn:
            specs = turn.offer_tools(by_name)
            await self._gather(turn)
            result = await turn.operate(specs, max_rounds=max_rounds, **kwargs)
            responses = [a for a in result.action_responses if a is not None]
            if responses and self._context_providers:
                await self._context_providers.gather_writeback(self, responses)
        return result


from ._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())

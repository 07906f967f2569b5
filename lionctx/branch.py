"""LionAGI-style ``Branch``: a conversation with lazily owned context providers.

Every operation is one :class:`lionctx._turn.Turn`: the provider pass, the request
with the blocks rendered into a copy (never into the stored history), the model.
``render="tags"`` puts ``<context name="...">`` blocks after the system text;
``render="lionagi"`` sends LionAGI 0.36's fold byte for byte (``docs/faces.md``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio

from ._context import RunContext, coerce_run_context
from ._exceptions import InvalidType, InvalidValue
from ._policy import check_count
from ._request import build_request
from ._task_local import TaskLocal
from ._turn import Conversation, Turn, chat_model
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


class Branch(Conversation):
    """One conversation: system message, history, model, providers.

    ``system``: the system text (``None``: no system message). ``model``: any
    :class:`~lionctx.models.ChatModel` (``stream`` too for :meth:`run`); by default an
    :class:`~lionctx.OpenAIChatModel` from the environment. ``messages``: initial
    history (copied; a leading system message is the system). ``run_context``: a
    :class:`RunContext` or anything shaped like one; providers read it.
    ``inject_systemless``: without a system message, call providers anyway (their
    blocks form a system message of their own, or fold into the first user message
    in lionagi mode); otherwise a systemless branch calls none. ``render``: ``"tags"``
    or ``"lionagi"``.

    ``context_engine``: ``None`` (default), a :class:`~lionctx.engines.ContextEngine`
    (a registered shared instance is cloned for the branch) or an engine name;
    ``engine_config``: a ``context`` configuration (mapping, section, or YAML/TOML
    path); see ``docs/engines.md``. ``dedupe_history``: skip a provider's block (row
    ``skipped``, reason ``duplicate of message N``) that an assistant, tool or later
    system message of this branch already said whole (``docs/dedupe.md``).
    """

    def __init__(self, system: str | None = None, model: ChatModel | None = None, *,
                 messages: Iterable[Mapping[str, Any]] | None = None, run_context: Any = None,
                 inject_systemless: bool = False, render: RenderMode = "tags",
                 name: str | None = None, context_engine: ContextEngine | str | None = None,
                 engine_config: Any = None, dedupe_history: bool = False) -> None:
        if render not in RENDER_MODES:
            raise InvalidValue(f"render must be one of {RENDER_MODES}, got {render!r}")
        if not isinstance(inject_systemless, bool):
            raise InvalidType(f"inject_systemless must be a bool, got {inject_systemless!r}")
        super().__init__(name=name)
        self.model: ChatModel = chat_model(model)
        self.render: RenderMode = render
        self.inject_systemless = inject_systemless
        self.dedupe_history = bool(dedupe_history)
        self.run_context: RunContext = coerce_run_context(run_context)
        if messages is not None:
            self.messages = messages
        if system is not None:
            if self.system is not None:
                raise InvalidValue("system given twice: as system= and as the first of messages=")
            self.system = system
        # LionAGI's private attribute names; no registry until someone asks for one.
        self._context_providers: ContextProviderRegistry | None = None
        # Each task's own last report (the last from any task as the fallback).
        self._reports: TaskLocal[ProviderReport] = TaskLocal()
        self._engine_session: EngineSession | None = None
        if context_engine is not None or engine_config is not None:
            from .engines._session import open_session

            self._engine_session = open_session(context_engine, engine_config, model=self.model)

    def __repr__(self) -> str:
        providers = len(self._context_providers) if self._context_providers is not None else 0
        session = self._engine_session
        engine = f", engine={session.label!r}" if session is not None else ""
        return (f"Branch(name={self.name!r}, messages={len(self.messages)}, "
                f"providers={providers}, render={self.render!r}{engine})")

    # -- state -------------------------------------------------------------------
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
        """The report of this task's last provider pass on this branch, else the last
        from any task; ``None`` before any. Turns without providers leave it as it is."""
        return self._reports.get()

    @property
    def _last_context_report(self) -> ProviderReport | None:
        # LionAGI's name for the branch-level report (the last pass from any task).
        return self._reports.last

    def clone(self, *, with_providers: bool = False) -> Branch:
        """A new branch with copies of the history (uids kept), same model and settings,
        a shallow copy of the run context. Providers are not copied (as in LionAGI)
        unless ``with_providers=True`` (the same entries, fresh stats)."""
        new = Branch(model=self.model, messages=self.messages,  # copied, uids kept
                     run_context=dataclasses.replace(self.run_context),
                     inject_systemless=self.inject_systemless, render=self.render,
                     name=self.name, dedupe_history=self.dedupe_history)
        if with_providers and self._context_providers is not None:
            new._context_providers = self._context_providers.copy()
        if self._engine_session is not None:
            new._engine_session = self._engine_session.clone(self.model)
        return new

    # -- engine session ------------------------------------------------------------
    def reset(self) -> None:
        """Clear the history and ``last_response``, keeping the system message and the
        providers. A context engine's session ends (``on_session_end``, then
        ``on_session_reset``); the next turn starts a new one."""
        if (session := self._engine_session) is not None:
            session.reset(self.messages)
        self._messages = self._messages[:1] if self.system is not None else []
        self.last_response = None

    def end_session(self) -> None:
        """End the context engine's session (``on_session_end``); a later turn starts a
        new one. Does nothing without an engine or before the first turn."""
        if (session := self._engine_session) is not None:
            session.end(self.messages)

    async def aclose(self) -> None:
        """:meth:`end_session` in a worker thread; the (shared) model is not closed."""
        if self._engine_session is not None and self._engine_session.active:
            await anyio.to_thread.run_sync(self.end_session)

    async def __aenter__(self) -> Branch:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    # -- the turn ----------------------------------------------------------------
    def _turn(self, instruction: Instruction, *, record: bool = True) -> Turn:
        return Turn(self, self.model, instruction, session=self._engine_session,
                    run_context=self.run_context, render=self.render, record=record)

    async def _gather(self, turn: Turn) -> None:
        """The provider pass for ``turn``; its report is this task's."""
        report = await turn.gather(self._context_providers, self,
                                   inject=self.system is not None or self.inject_systemless)
        if report is not None:
            self._reports.set(report)

    # -- operations ----------------------------------------------------------------
    def build_request(self, instruction: str | Instruction, *,
                      blocks: Iterable[ContextBlock | str | tuple[str, str]] = (),
                      guidance: str | None = None) -> list[dict[str, Any]]:
        """The messages one call would send with these explicit ``blocks``; calls no
        provider or engine and records nothing."""
        return build_request(self.messages, as_instruction(instruction, guidance),
                             tuple(as_block(b) for b in blocks), (), self.render)

    async def prepare(self, instruction: str | Instruction, *,
                      guidance: str | None = None) -> list[dict[str, Any]]:
        """The messages a call would send now: the provider pass (its report becomes
        ``last_context_report``) and the engine's ``select_context``; nothing is sent,
        recorded or reported to the engine."""
        turn = self._turn(as_instruction(instruction, guidance), record=False)
        await self._gather(turn)
        return await turn.prepare()

    async def chat(self, instruction: str | Instruction, *, guidance: str | None = None,
                   **kwargs: Any) -> ChatResponse:
        """Send one instruction with this turn's context; record nothing. Extra keywords
        go to the model. With a context engine it is a turn that never compacts."""
        async with self._turn(as_instruction(instruction, guidance), record=False) as turn:
            await self._gather(turn)
            return await turn.exchange(**kwargs)

    async def communicate(self, instruction: str | Instruction, *, guidance: str | None = None,
                          **kwargs: Any) -> str:
        """Send one instruction; record it and the reply after the call; return the text."""
        async with self._turn(as_instruction(instruction, guidance)) as turn:
            await self._gather(turn)
            response = await turn.exchange(**kwargs)
            turn.store()
        return response.text

    async def run(self, instruction: str | Instruction, *, guidance: str | None = None,
                  **kwargs: Any) -> AsyncIterator[str]:
        """Stream the reply as text deltas (the model must have ``stream``).

        The instruction is recorded before streaming (as in LionAGI), the reply when the
        stream ends normally (``last_response`` then holds it with its usage). Closing
        the stream early reports the engine's turn as interrupted.
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
            turn.store()

    async def operate(self, instruction: str | Instruction, *, tools: Sequence[Any],
                      guidance: str | None = None, max_rounds: int = 10,
                      **kwargs: Any) -> OperateResult:
        """Send an instruction with tools and run the tool-call loop.

        ``tools``: Python callables (sync or async), :class:`Tool` objects, or OpenAI
        function-tool specs (a call to a spec without a function is answered with an
        error and has no action response). Context is gathered once for every round;
        the whole exchange is recorded when the loop ends. With action responses and
        registered providers, ``providers.gather_writeback(branch, responses)`` runs
        once before this returns. A context engine's tools are offered after the
        user's (a user tool with the same name wins).
        """
        by_name = tools_by_name(tools)
        check_count(max_rounds, "max_rounds")
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

"""One model turn on a :class:`Conversation`, the piece :class:`~lionctx.Branch` (a
conversation itself) and the agentium ``Agent`` both compose: ``async with Turn(...)``,
then ``gather`` (the provider pass), ``exchange`` (request, model, reply) and ``store``;
leaving it runs compaction (``record=True``) and the engine's ``on_turn_complete``.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ._context import RunContext
from ._exceptions import InvalidType
from ._log import logger_for
from ._messages import (
    each_message,
    ensure_tool_call_uids,
    ensure_uid,
    message_text,
    new_uid,
    strip_persistence_fields,
    system_message,
    tool_message,
)
from ._request import build_request, selected_blocks
from ._values import ContextBlock, Instruction, OperateResult, RenderMode, add_usage
from .models import ChatResponse, ModelResponseError
from .models._tools import ActionResponse, Tool, parse_arguments, run_tool_call

if TYPE_CHECKING:  # pragma: no cover
    from .engines._session import EngineSession
    from .registry import ContextProviderRegistry, ProviderReport

__all__ = ["Conversation", "Turn", "chat_model", "copy_messages"]

logger = logger_for("lionctx.branch")  # the turn logs as the branch it serves


def chat_model(model: Any) -> Any:
    """``model`` (refused without ``complete()``); for ``None``, one from the environment."""
    if model is None:
        from .models._openai_chat import OpenAIChatModel

        return OpenAIChatModel()
    if not callable(getattr(model, "complete", None)):
        raise InvalidType(f"model must have complete() (a ChatModel), got {type(model).__name__}")
    return model


def copy_messages(value: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Deep copies of ``value``'s message dicts, each with a ``message_uid``."""
    if isinstance(value, (str, bytes, Mapping)):
        raise InvalidType(f"messages must be a list of message dicts, got {type(value).__name__}")
    return [ensure_uid(copy.deepcopy(dict(msg))) for msg in each_message(value)]


class Conversation:
    """The stored history (system message first, each row with its ``message_uid``)
    and the last reply. A compaction replaces the list: hold the conversation."""

    def __init__(self, messages: list[dict[str, Any]] | None = None, *,
                 name: str | None = None) -> None:
        self._messages: list[dict[str, Any]] = messages if messages is not None else []
        self.name = name
        #: The most recent reply of any turn on this conversation (last writer wins).
        self.last_response: ChatResponse | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The stored history (system message first, if any). Never holds a context block."""
        return self._messages

    @messages.setter
    def messages(self, value: Iterable[Mapping[str, Any]]) -> None:
        self._messages = copy_messages(value)

    @property
    def system(self) -> str | None:
        """The system text, or ``None`` when there is no system message."""
        msgs = self._messages
        return message_text(msgs[0]) if msgs and msgs[0].get("role") == "system" else None

    @system.setter
    def system(self, value: str | None) -> None:
        msgs = self._messages
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

    def splice(self, snapshot: Sequence[dict[str, Any]], compacted: list[dict[str, Any]]) -> bool:
        """Replace the ``snapshot`` prefix of the history with ``compacted``; False (and
        nothing changed) when that prefix changed meanwhile: the compaction is stale."""
        current = self._messages
        if len(current) < len(snapshot) or any(
                a is not b for a, b in zip(snapshot, current, strict=False)):
            return False
        self._messages = [*compacted, *current[len(snapshot):]]
        return True


class Turn:
    """One model turn of ``instruction`` on ``conversation``; ``record=False``: no store, no
    compaction."""

    def __init__(self, conversation: Conversation, model: Any, instruction: Instruction, *,
                 session: EngineSession | None = None, run_context: RunContext | None = None,
                 render: RenderMode = "tags", record: bool = True) -> None:
        self.conversation = conversation
        self.model = chat_model(model)
        self.instruction = instruction
        self.session = session
        self.run_context = run_context
        self.render: RenderMode = render
        self.record = record
        #: The blocks :meth:`gather` selected (rendered into every request).
        self.blocks: tuple[ContextBlock, ...] = ()
        #: This turn's messages: the instruction, then replies, tool calls, results.
        self.messages: list[dict[str, Any]] = [instruction.to_message()]
        self._stored = 0
        #: The last request sent and the last reply (None before the first).
        self.sent: list[dict[str, Any]] | None = None
        self.response: ChatResponse | None = None
        self.api_calls = 0
        self.exit_reason = "completed"
        self.turn_id: str | None = None
        self._user_tools: Mapping[str, Tool] = {}
        self._engine_tools: frozenset[str] = frozenset()

    @property
    def pending(self) -> list[dict[str, Any]]:
        """This turn's messages not stored (yet): they complete its transcript."""
        return self.messages[self._stored:]

    # -- context and the request -----------------------------------------------------------
    async def gather(self, registry: ContextProviderRegistry | None, owner: Any, *,
                     inject: bool = True) -> ProviderReport | None:
        """``registry``'s pass for this turn (``owner`` and the instruction); its blocks
        are kept. None for no providers; ``inject=False``: every row skipped."""
        if not registry:
            return None
        if not inject:
            return registry.skipped_report()
        report = await registry.gather(owner, self.instruction, tagged=self.render == "tags")
        self.blocks = selected_blocks(report, self.render)
        return report

    def build(self) -> list[dict[str, Any]]:
        """The request as rendered, before any engine: build it before storing."""
        return build_request(self.conversation.messages, self.instruction, self.blocks,
                             self.messages[1:], self.render)

    async def prepare(self) -> list[dict[str, Any]]:
        """:meth:`build`; the engine's ``select_context`` may replace it for this call."""
        request = self.build()
        session = self.session
        if session is None or not session.observes("select_context"):
            return request
        selected = await session.select(request, conversation=self.conversation.messages,
                                        incoming=self.instruction.to_message())
        if selected is request:
            return request
        # An engine may build its selection from uid-carrying history: never send those.
        selected = strip_persistence_fields(selected)
        if self.render == "lionagi" and (self.blocks or self.conversation.system is not None):
            # In lionagi mode the system text and blocks live in the first user
            # message: it is the system prefix there, and stays as it was.
            first = next((m for m in request if m.get("role") == "user"), None)
            kept = next((m for m in selected if m.get("role") == "user"), None)
            if first is not None and kept != first:
                logger.warning("context engine %r select_context changes the first user message, "
                               "which holds the system text in lionagi mode; using the "
                               "unmodified request", session.label)
                return request
        return selected

    # -- the model ---------------------------------------------------------------------------
    async def send(self, request: list[dict[str, Any]], *,
                   tools: Sequence[Mapping[str, Any]] | None = None,
                   **kwargs: Any) -> ChatResponse:
        """One model call (``complete``); the reply is recorded as the turn's last."""
        self.api_calls += 1
        self.sent = request
        response: ChatResponse = await self.model.complete(request, tools=tools, **kwargs)
        self._received(response)
        return response

    async def stream(self, request: list[dict[str, Any]], *,
                     tools: Sequence[Mapping[str, Any]] | None = None,
                     **kwargs: Any) -> AsyncGenerator[str, None]:
        """One streamed model call: text deltas; then the reply is :attr:`response`, added."""
        open_stream = getattr(self.model, "stream", None)
        if not callable(open_stream):
            raise InvalidType(f"model must have stream() to stream a reply, got "
                            f"{type(self.model).__name__}")
        self.api_calls += 1
        self.sent = request
        chat_stream = open_stream(request, tools=tools, **kwargs)
        try:
            async for delta in chat_stream:
                yield delta
        finally:
            await chat_stream.aclose()
        if (response := chat_stream.response) is None:
            raise ModelResponseError("the model stream ended without a response")
        self._received(response)
        self.add(response.to_message())

    def _received(self, response: ChatResponse) -> None:
        self.response = response
        self.conversation.last_response = response
        if self.session is not None:
            self.session.after_response(response.usage)

    async def exchange(self, **kwargs: Any) -> ChatResponse:
        """:meth:`prepare`, :meth:`send`, and the reply added to the turn."""
        response = await self.send(await self.prepare(), **kwargs)
        self.add(response.to_message())
        return response

    # -- this turn's messages ----------------------------------------------------------------
    def add(self, message: dict[str, Any]) -> dict[str, Any]:
        """Append a message to this turn (stored by the next :meth:`store`)."""
        self.messages.append(message)
        return message

    def store(self) -> list[dict[str, Any]]:
        """Store this turn's pending messages in the conversation; return them."""
        pending = self.pending
        self.conversation.messages.extend(ensure_uid(message) for message in pending)
        self._stored = len(self.messages)
        return pending

    # -- tools -----------------------------------------------------------------------------------
    def offer_tools(self, tools: Mapping[str, Tool]) -> list[dict[str, Any]]:
        """``tools``' specs, then the engine's (one named like a user tool is left out)."""
        self._user_tools = tools
        specs = [t.spec() for t in tools.values()]
        if self.session is None:
            return specs
        names: set[str] = set()
        for spec in self.session.tools():
            name = spec["function"]["name"]
            if name in tools or name in names:
                logger.warning("context engine %r tool %r is left out: %s", self.session.label,
                               name, "a user tool has that name" if name in tools
                               else "the engine offers it twice")
                continue
            names.add(name)
            specs.append(spec)
        self._engine_tools = frozenset(names)
        return specs

    async def run_tool(self, call: Mapping[str, Any]) -> tuple[ActionResponse | None, str]:
        """Answer one tool call: (action response or None when not run, result text)."""
        fn_part = call.get("function") or {}
        name = fn_part.get("name")
        if self.session is None or name not in self._engine_tools:
            chosen = self._user_tools.get(name) if isinstance(name, str) else None
            return await run_tool_call(chosen, call)
        call_id = call.get("id") or ""
        raw = fn_part.get("arguments")
        content = await self.session.dispatch_tool(name, raw, turn_id=self.turn_id,
                                                   task_id=self._task_id, tool_call_id=call_id)
        try:
            args = parse_arguments(raw)
        except (ValueError, RecursionError):  # the model's text: any shape, any depth
            args = None
        if not isinstance(args, dict):
            return None, content  # not run: dispatch told the model why
        return ActionResponse(call_id, name, args, content), content

    async def operate(self, specs: Sequence[Mapping[str, Any]], *, max_rounds: int,
                      **kwargs: Any) -> OperateResult:
        """The tool loop until a reply without calls or ``max_rounds``; then store."""
        actions: list[ActionResponse | None] = []
        usage: dict[str, Any] | None = None
        stopped: Literal["done", "max_rounds"] = "max_rounds"
        for rounds in range(1, max_rounds + 1):  # noqa: B007  (the count is reported)
            response = await self.send(await self.prepare(), tools=specs or None, **kwargs)
            usage = add_usage(usage, response.usage)
            assistant = self.add(ensure_uid(response.to_message()))
            if not response.tool_calls:
                stopped = "done"
                break
            uids = ensure_tool_call_uids(assistant)
            for call in response.tool_calls:
                action, content = await self.run_tool(call)
                actions.append(action)
                result = ensure_uid(tool_message(call.get("id") or "", content))
                if call.get("id") in uids:
                    result["_tool_call_uid"] = uids[call["id"]]
                self.add(result)
        recorded = self.store()
        self.exit_reason = "completed" if stopped == "done" else "max_rounds"
        output = response.content if stopped == "done" else None
        return OperateResult(output, response, actions, recorded, usage, rounds, stopped)

    # -- the engine's turn -----------------------------------------------------------------------
    @property
    def _task_id(self) -> str | None:
        return self.run_context.run_id if self.run_context is not None else None

    async def __aenter__(self) -> Turn:
        if self.session is not None:  # the engine session starts (on_session_start) if needed
            self.session.start(self.run_context.session_id if self.run_context else None)
            self.turn_id = new_uid()
        return self

    async def __aexit__(self, exc_type: Any, error: BaseException | None, tb: Any) -> None:
        # Compaction (when record), then on_turn_complete; an error is reported as a
        # failure (an Exception) or an interruption.
        if (session := self.session) is None:
            return
        if error is None and self.record:
            try:
                await self._compact(session)
            except BaseException as exc:
                self._complete(session, exc)
                raise
        self._complete(session, error)

    async def _compact(self, session: EngineSession) -> None:
        conversation = self.conversation
        snapshot = list(conversation.messages)
        usage = self.response.usage if self.response is not None else None
        compacted = await session.compress(snapshot, usage)
        if compacted is not None and not conversation.splice(snapshot, compacted):
            logger.warning("conversation %r changed while context engine %r compacted it; "
                           "compaction discarded", conversation.name, session.label)

    def _complete(self, session: EngineSession, error: BaseException | None) -> None:
        if not session.observes("on_turn_complete"):
            return  # nothing built for an engine that does not observe turns
        failed = isinstance(error, Exception)
        interrupted = error is not None and not failed
        reason = (self.exit_reason if error is None else "error" if failed
                  else "cancelled" if isinstance(error, anyio.get_cancelled_exc_class())
                  else "interrupted")
        assert self.turn_id is not None  # set by start(), which a session turn ran
        session.turn_complete([*self.conversation.messages, *self.pending],
                              self.response.usage if self.response is not None else None,
                              turn_id=self.turn_id, task_id=self._task_id,
                              api_call_count=self.api_calls, interrupted=interrupted,
                              failed=failed, exit_reason=reason)


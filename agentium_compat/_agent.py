"""agentium's ``Agent``, with context providers wired into the instructions resolver.

::

    agent = Agent(
        name="support-bot",
        model=openai("gpt-4o"),
        instructions=lambda c: f"You are a support assistant.\\n\\n{c['context']}\\n\\nBe concise.",
        context_providers=[notes, status, profile],
    )
    result = await agent.run("Is the API down?", user_id="u1", tenant_id="acme")

Each run builds a :class:`~lionctx.RunContext` from its keywords (snake_case or
camelCase), resolves the providers with the user's input as the query (concurrent,
allSettled, ``<context name="...">`` tags, list order), and hands the string to the
instructions: a function receives an :class:`InstructionContext` (``c.context`` and
``c["context"]``, plus every run-context field in both spellings); a plain string
gets the context appended as its own section after a blank line, as agentium
appends system-prompt sections. An explicit ``context=`` wins: providers are then
not called.

The request goes through the same turn machinery as :class:`lionctx.Branch`.

Context engine (optional, as on a Branch: none unless ``context_engine=`` or
``engine_config=`` asks). An agent serves many conversations, so each
``session_id`` gets its own engine: runs without a session id use the agent's engine
itself, and each new session id gets a ``clone_for_agent()`` of it. Every run is a
turn for that session's engine (``select_context``, ``update_from_response``,
compaction, ``on_turn_complete``); the conversation after the run, compacted when
the engine compressed it, is ``RunResult.history``: pass it as ``messages=`` next
time. ``agent.end_session(session_id)``, ``agent.reset(session_id)`` and ``await
agent.aclose()`` (every session) end sessions.

A long-running server sees many session ids, so an agent keeps at most
``max_sessions`` (default 1024) of their engines: a run for a new session id beyond
that evicts the least recently run session, whose engine gets ``on_session_end``
(in a worker thread, during that run; errors are logged, never raised) and is
dropped. Sessions with a run in flight are never evicted (the bound may then be
exceeded until they finish). An evicted session id that runs again starts a new
session with a fresh engine. Runs without a session id are not counted.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lionctx._adapters import fetch_method, provider_name
from lionctx._breaker import DEFAULT_BREAKERS, coerce_breakers
from lionctx._dedupe import HistoryIndex
from lionctx._exceptions import InvalidType, InvalidValue
from lionctx._literals import with_object_literals
from lionctx._messages import ensure_uid, system_message
from lionctx._policy import check_max_chars, check_number, check_seconds
from lionctx._stability import PrefixHistory, session_key
from lionctx._suggest import did_you_mean
from lionctx._turn import Conversation, Turn, copy_messages
from lionctx._values import Instruction
from lionctx.models._base import ChatModel
from lionctx.resolve import DEFAULT_TIMEOUT, Resolution, resolve_context

from ._context import RunContext, coerce_run_context, spellings
from ._options import accepts_options_mapping
from ._results import InstructionContext, Instructions, RunResult

if TYPE_CHECKING:  # pragma: no cover
    from lionctx.engines._base import ContextEngine
    from lionctx.engines._session import EngineSession, SessionPool

__all__ = ["Agent", "InstructionContext", "Instructions", "RunResult"]

from lionctx._log import logger_for

logger = logger_for(__name__)

# run() keywords in either spelling -> RunContext field
_RUN_KEYS = spellings("user_id", "tenant_id", "session_id", "session_state", "run_id",
                      "metadata", "dependencies", "signal")


def _check_providers(providers: Any) -> list[Any]:
    if providers is None:
        return []
    if isinstance(providers, (str, bytes, Mapping)) or not isinstance(providers, Sequence):
        raise InvalidType(f"context_providers must be a list of providers, got {providers!r}")
    providers = with_object_literals(providers, "context_providers")
    for i, p in enumerate(providers):
        if fetch_method(p) is None:
            raise InvalidType(
                f"context_providers[{i}] ({provider_name(p)}) has no fetch(query, ctx) "
                "or fetchContext(query, ctx) method"
            )
    return list(providers)


def _check_max_sessions(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"max_sessions must be an int >= 1, got {value!r}")
    if value < 1:
        raise InvalidValue(f"max_sessions must be an int >= 1, got {value!r}")
    return value


@accepts_options_mapping
class Agent:
    """An agent with instructions, a model and optional context providers.

    ``instructions``: a string, or a function (sync or async) of an
    :class:`InstructionContext` returning the system text. ``context_providers``
    are resolved on every run (object literals ``{"name": ..., "fetch": ...}``
    included); ``context_budget`` (tokens of the tagged blocks), ``context_timeout``
    (seconds per provider, 10 by default, ``None``: none), ``context_deadline`` (seconds for
    all) and ``context_max_chars`` (size limit of one provider's text) pass through to
    :func:`lionctx.resolve_context`. ``model_settings``
    (``temperature``...) go into every request. Without ``model`` an
    :class:`~lionctx.OpenAIChatModel` is configured from the environment.

    ``context_engine`` / ``engine_config``: as for :class:`lionctx.Branch` (default:
    no engine). The engine serves runs without a ``session_id``; each session id
    gets its own clone (see the module docs). ``max_sessions``: how many session
    ids keep an engine at once (default 1024); beyond it the least recently run
    session is ended (``on_session_end``) and forgotten.

    Production: ``context_breaker`` (default ``True``: the process-wide
    circuit breakers, one per source, failures counted per user where a provider
    reads the user (see ``docs/breakers.md``); ``False``: off); ``context_dedupe``
    (inject the same text from two providers once: the copy admission keeps);
    ``dedupe_history`` (skip a block that an assistant, tool or later system message
    of the given ``messages`` holds as a whole block, never a user's; each session's
    runs read only the messages new since its previous run). Each session keeps its
    previous turn's block digests: ``result.context_report.cache_break`` names the
    first block that changed, ``prefix_stable`` says whether none did. A session is
    the run context's tenant, user and session id (``lionctx._stability.session_key``):
    a run never compares with another user's.
    """

    def __init__(
        self,
        *,
        name: str,
        model: ChatModel | None = None,
        instructions: Instructions = "",
        context_providers: Sequence[Any] | None = None,
        context_budget: float | None = None,
        context_timeout: float | None = DEFAULT_TIMEOUT,
        context_deadline: float | None = None,
        context_max_chars: int | None = None,
        model_settings: Mapping[str, Any] | None = None,
        contextProviders: Sequence[Any] | None = None,  # noqa: N803 - agentium spelling
        context_engine: ContextEngine | str | None = None,
        engine_config: Any = None,
        max_sessions: int = 1024,
        context_breaker: Any = True,
        context_dedupe: bool = False,
        dedupe_history: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidValue(f"name must be a non-empty str, got {name!r}")
        max_sessions = _check_max_sessions(max_sessions)
        if not (isinstance(instructions, str) or callable(instructions)):
            raise InvalidType(f"instructions must be a str or a function, got "
                            f"{type(instructions).__name__}")
        if context_providers is not None and contextProviders is not None:
            raise InvalidType("pass context_providers or contextProviders, not both")
        context_budget = check_number(context_budget, "context_budget", allow_none=True)
        if model_settings is not None and not isinstance(model_settings, Mapping):
            raise InvalidType(f"model_settings must be a mapping, got {model_settings!r}")
        if model is None:
            from lionctx.models._openai_chat import OpenAIChatModel

            model = OpenAIChatModel()
        elif not callable(getattr(model, "complete", None)):
            raise InvalidType(
                f"model must have complete() (a ChatModel), got {type(model).__name__}")
        self.name = name
        self.model = model
        self.instructions = instructions
        self.context_providers = _check_providers(
            context_providers if context_providers is not None else contextProviders)
        self.context_budget = context_budget
        self.context_timeout = check_seconds(context_timeout, "context_timeout")
        self.context_deadline = check_seconds(context_deadline, "context_deadline")
        self.context_max_chars = check_max_chars(context_max_chars, "context_max_chars")
        self.model_settings = dict(model_settings or {})
        self._engine: ContextEngine | None = None
        self._pool: SessionPool | None = None
        if context_engine is not None or engine_config is not None:
            # lionctx.engines loads only for agents that use an engine
            from lionctx.engines._session import SessionPool, open_session

            session = open_session(context_engine, engine_config, model=model)
            if session is not None:
                self._engine = session.engine
                self._pool = SessionPool(session.engine, model=model,
                                         max_sessions=max_sessions, owner=f"agent {name!r}")
        self._max_sessions = max_sessions
        # Circuit breakers per provider instance, dedupe, and each session's
        # previous-turn block digests (for RunResult.context_report.cache_break).
        self._breakers = coerce_breakers(context_breaker, DEFAULT_BREAKERS)
        self.context_dedupe = bool(context_dedupe)
        self.dedupe_history = bool(dedupe_history)
        self._prefixes = PrefixHistory(max_sessions)  # previous digests, per session_key
        self._seen: OrderedDict[Any, HistoryIndex] = OrderedDict()  # dedupe_history, per session
        self._seen_lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"Agent(name={self.name!r}, model={self.model!r}, "
                f"context_providers={[provider_name(p) for p in self.context_providers]})")

    # -- context engine --------------------------------------------------------------
    @property
    def max_sessions(self) -> int:
        """How many session ids keep an engine at once (see the module docs)."""
        return self._max_sessions

    @max_sessions.setter
    def max_sessions(self, value: int) -> None:
        self._max_sessions = _check_max_sessions(value)
        self._prefixes.max_sessions = self._max_sessions  # takes effect at its next turn
        if self._pool is not None:
            self._pool.max_sessions = self._max_sessions

    @property
    def context_engine(self) -> ContextEngine | None:
        """The engine of runs without a session id (``None``: the agent has no engine)."""
        return self._engine

    def context_engine_for(self, session_id: Any = None) -> ContextEngine | None:
        """The engine serving ``session_id``'s runs, or ``None`` before its first run
        (and always without an engine)."""
        if session_id is None or self._pool is None:
            return self._engine
        session = self._pool.get(session_id)
        return session.engine if session is not None else None

    def end_session(self, session_id: Any = None) -> None:
        """End ``session_id``'s engine session (``on_session_end``) and forget its
        engine; without a session id, end the session of runs that gave none."""
        if self._pool is not None:
            self._pool.end(session_id)

    def reset(self, session_id: Any = None) -> None:
        """``session_id``'s conversation starts over: ``on_session_end`` then
        ``on_session_reset`` on its engine (kept, with its settings)."""
        if self._pool is not None:
            self._pool.reset(session_id)

    async def aclose(self) -> None:
        """End every engine session (in a worker thread). The model is not closed."""
        if self._pool is not None:
            await self._pool.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def _resolve_instructions(self, ictx: InstructionContext) -> str:
        instructions = self.instructions
        if isinstance(instructions, str):
            if instructions and ictx.context:
                return f"{instructions}\n\n{ictx.context}"
            return instructions or ictx.context
        result = instructions(ictx)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, str):
            raise InvalidType(f"agent {self.name!r}: instructions function returned "
                            f"{type(result).__name__}, expected str")
        return result

    async def run(
        self,
        input: str,  # noqa: A002 - agentium's name
        options: Mapping[str, Any] | None = None,
        *,
        context: str | Resolution | None = None,
        run_context: Any = None,
        messages: Sequence[Mapping[str, Any]] | None = None,
        **keywords: Any,
    ) -> RunResult:
        """Run one turn for ``input``.

        Run-context keywords: ``user_id``, ``tenant_id``, ``session_id``,
        ``session_state``, ``run_id``, ``metadata``, ``dependencies``, ``signal``
        (camelCase accepted: ``userId``, ``tenantId``...), either as keywords or in
        an agentium-style ``options`` mapping (which may also hold ``context``).
        ``run_context`` is a base RunContext (or mapping) the keywords override.
        ``context`` (a str, or a :class:`~lionctx.Resolution`) skips the providers.
        ``messages`` is prior conversation (no system message) sent before the input.
        """
        if not isinstance(input, str):
            raise InvalidType(f"input must be a str, got {type(input).__name__}")
        given: dict[str, Any] = {}
        if options is not None:
            if not isinstance(options, Mapping):
                raise InvalidType(f"options must be a mapping, got {type(options).__name__}")
            opts = dict(options)
            if "context" in opts:
                if context is not None:
                    raise InvalidType("context given twice: in options and as a keyword")
                context = opts.pop("context")
            for key in ("run_context", "runContext", "messages"):
                if key in opts:
                    raise InvalidType(f"pass {key!r} as a keyword, not in options")
            given.update(self._run_fields(opts))
        for key, value in self._run_fields(keywords).items():
            if key in given:
                raise InvalidType(f"{key} given twice")
            given[key] = value
        ctx = coerce_run_context(run_context, **{k: v for k, v in given.items() if v is not None})
        if messages is not None:
            messages = list(messages)
            if any(isinstance(m, Mapping) and m.get("role") == "system" for m in messages[:1]):
                raise InvalidValue("messages must not start with a system message: the agent's "
                                 "instructions are its system message")

        report: Resolution | None = None
        if context is not None:
            if isinstance(context, Resolution):
                report, text = context, context.text
            elif isinstance(context, str):
                text = context
            else:
                raise InvalidType(f"context must be a str or a Resolution, got "
                                f"{type(context).__name__}")
        elif self.context_providers:
            report = await resolve_context(
                self.context_providers, input, ctx, budget=self.context_budget,
                timeout=self.context_timeout, deadline=self.context_deadline,
                max_chars=self.context_max_chars, baselines=self._prefixes,
                history=self._history(ctx, messages),
                **self._production_options(messages))
            text = report.text
        else:
            text = ""

        system = await self._resolve_instructions(InstructionContext(text, ctx, input, self.name))
        stored = copy_messages(messages) if messages is not None else []
        if system:
            stored.insert(0, ensure_uid(system_message(system)))
        conversation = Conversation(stored, name=self.name)
        if self._pool is None:
            turn = await self._turn(conversation, Instruction(input), ctx, None)
        else:
            async with self._pool.session(ctx.session_id) as session:
                turn = await self._turn(conversation, Instruction(input), ctx, session)
        response = turn.response
        assert response is not None and turn.sent is not None  # the turn returned normally
        stored = conversation.messages
        history = stored[1:] if system and stored and stored[0].get("role") == "system" else stored
        return RunResult(
            output=response.text, usage=response.usage, context_report=report,
            messages=turn.sent, context=text, system=system or None, run_context=ctx,
            response=response, agent=self.name, history=list(history),
        )

    async def _turn(self, conversation: Conversation, instruction: Instruction,
                    ctx: RunContext, session: EngineSession | None) -> Turn:
        """One recorded turn (the same turn a Branch's communicate runs)."""
        async with Turn(conversation, self.model, instruction, session=session,
                        run_context=ctx) as turn:
            await turn.exchange(**self.model_settings)
            turn.store()
        return turn

    # -- production options ------------------------------------------------------------
    def _production_options(self, messages: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
        return {"breaker": self._breakers if self._breakers is not None else False,
                "dedupe": self.context_dedupe}

    def _history(self, ctx: RunContext, messages: Sequence[Mapping[str, Any]] | None
                 ) -> HistoryIndex | None:
        """``dedupe_history``: the session's index of what the system side said, brought
        up to date with ``messages`` (only the messages new since its last run are read)."""
        if not self.dedupe_history or not messages:
            return None
        key = session_key(ctx)
        with self._seen_lock:
            index = self._seen.pop(key, None) or HistoryIndex()
            self._seen[key] = index  # most recent last
            while len(self._seen) > self._max_sessions:
                self._seen.popitem(last=False)
        index.update(messages)
        return index

    @staticmethod
    def _run_fields(values: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in values.items():
            name = _RUN_KEYS.get(key)
            if name is None:
                raise InvalidType(f"unknown run option {key!r}"
                                  f"{did_you_mean(key, [*_RUN_KEYS, 'context'])}")
            if name in out:
                raise InvalidType(f"{name} given twice (as {key!r})")
            out[name] = value
        return out

"""agentium's ``Agent``: each run resolves the providers over the agent's one pass (the
input is the query), hands the ``<context>`` string to the instructions, then runs the
same turn a :class:`lionctx.Branch` does (``docs/agentium.md``, ``docs/engines.md``).
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import lionctx._face as _face  # extension: what a face outside the package builds on
from lionctx import InvalidType, InvalidValue
from lionctx.models import ChatModel
from lionctx.resolve import DEFAULT_TIMEOUT, Resolution

from ._context import RunContext, spellings
from ._options import Words, accepts_options_mapping, read_options
from ._results import InstructionContext, Instructions, RunResult

if TYPE_CHECKING:  # pragma: no cover
    from lionctx.engines import ContextEngine

__all__ = ["Agent", "InstructionContext", "Instructions", "RunResult"]

# run() keywords in either spelling -> RunContext field (``context``: taken out before)
_RUN_KEYS = spellings("user_id", "tenant_id", "session_id", "session_state", "run_id",
                      "metadata", "dependencies", "signal") | {"context": "context"}
_RUN_WORDS = Words("options must be a mapping, got {type}", "unknown run option {key!r}{hint}",
                   "{name} given twice (as {key!r})")


def _check_providers(providers: Any) -> list[Any]:
    if providers is None:
        return []
    if isinstance(providers, (str, bytes, Mapping)) or not isinstance(providers, Sequence):
        raise InvalidType(f"context_providers must be a list of providers, got {providers!r}")
    providers = _face.with_object_literals(providers, "context_providers")
    for i, p in enumerate(providers):
        if _face.fetch_method(p) is None:
            raise InvalidType(
                f"context_providers[{i}] ({_face.provider_name(p)}) has no fetch(query, ctx) "
                "or fetchContext(query, ctx) method"
            )
    return list(providers)


@accepts_options_mapping
class Agent:
    """An agent with instructions, a model and optional context providers.

    ``instructions``: a string, or a function (sync or async) of an
    :class:`InstructionContext` returning the system text. ``context_providers``
    (object literals ``{"name": ..., "fetch": ...}`` included) are resolved on every
    run; ``context_budget`` (tokens of the tagged blocks), ``context_timeout`` (seconds
    per provider, 10 by default, ``None``: none), ``context_deadline`` (seconds for
    all) and ``context_max_chars`` (size limit of one provider's text) are
    :func:`lionctx.resolve_context`'s. ``model_settings`` (``temperature``...) go into
    every request. Without ``model`` an :class:`~lionctx.OpenAIChatModel` is
    configured from the environment.

    ``context_engine`` / ``engine_config``: as for :class:`lionctx.Branch` (default:
    none); each session id gets its own clone, at most ``max_sessions`` (default
    1024) at once, the least recently run ended and dropped first.

    Production: ``context_breaker`` (default ``True``: the process-wide circuit
    breakers, ``docs/breakers.md``; ``False``: off), ``context_dedupe`` (the same text
    from two providers injected once), ``dedupe_history`` (skip a block the system
    side of ``messages`` already holds, ``docs/dedupe.md``). Each session (tenant,
    user, session id) keeps its previous turn's digests:
    ``result.context_report.cache_break`` names the first block that changed.
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
        max_sessions = _face.check_max_sessions(max_sessions)
        if not (isinstance(instructions, str) or callable(instructions)):
            raise InvalidType(f"instructions must be a str or a function, got "
                              f"{type(instructions).__name__}")
        if context_providers is not None and contextProviders is not None:
            raise InvalidType("pass context_providers or contextProviders, not both")
        if model_settings is not None and not isinstance(model_settings, Mapping):
            raise InvalidType(f"model_settings must be a mapping, got {model_settings!r}")
        model = _face.chat_model(model)
        self.name = name
        self.model = model
        self.instructions = instructions
        self.context_providers = _check_providers(
            context_providers if context_providers is not None else contextProviders)
        # The context knobs live on the agent's one pass (checked here under their names).
        self._pass = _face.resolve_pass(
            budget=_face.check_number(context_budget, "context_budget", allow_none=True),
            timeout=_face.check_seconds(context_timeout, "context_timeout"),
            deadline=_face.check_seconds(context_deadline, "context_deadline"),
            max_chars=_face.check_max_chars(context_max_chars, "context_max_chars"),
            breaker=context_breaker, dedupe=context_dedupe,
            baselines=_face.PrefixHistory(max_sessions))  # previous digests, per session_key
        self.dedupe_history = bool(dedupe_history)
        self.model_settings = dict(model_settings or {})
        self._engine: ContextEngine | None = None
        self._pool: _face.SessionPool | None = None
        if context_engine is not None or engine_config is not None:
            # lionctx.engines loads only for agents that use an engine (_face's __getattr__)
            session = _face.open_session(context_engine, engine_config, model=model)
            if session is not None:
                self._engine = session.engine
                self._pool = _face.SessionPool(session.engine, model=model,
                                               max_sessions=max_sessions, owner=f"agent {name!r}")

    context_budget = _face.pass_knob("budget", "Token budget of the tagged blocks, or None.")
    context_timeout = _face.policy_knob("timeout", "Seconds each provider gets, or None.")
    context_deadline = _face.policy_knob("deadline", "Seconds for all providers, or None.")
    context_max_chars = _face.policy_knob("max_chars", "Size limit of one provider's text.")
    context_dedupe = _face.pass_knob("dedupe", "Inject the same text from two providers once.")

    def __repr__(self) -> str:
        return (f"Agent(name={self.name!r}, model={self.model!r}, "
                f"context_providers={[_face.provider_name(p) for p in self.context_providers]})")

    # -- context engine --------------------------------------------------------------
    @property
    def max_sessions(self) -> int:
        """How many session ids keep an engine at once."""
        return self._pass.baselines.max_sessions  # type: ignore[union-attr]

    @max_sessions.setter
    def max_sessions(self, value: int) -> None:
        value = _face.check_max_sessions(value)
        self._pass.baselines.max_sessions = value  # type: ignore[union-attr]
        if self._pool is not None:
            self._pool.max_sessions = value

    @property
    def context_engine(self) -> ContextEngine | None:
        """The engine of runs naming no session, tenant or user (``None``: no engine)."""
        return self._engine

    def context_engine_for(self, session_id: Any = None, *, tenant_id: Any = None,
                           user_id: Any = None) -> ContextEngine | None:
        """The engine serving ``session_id``'s runs (of ``tenant_id`` and ``user_id``, as
        given to :meth:`run`), or ``None`` before its first run (and always without an engine)."""
        whose = _whose({"tenant_id": tenant_id, "user_id": user_id})
        if self._pool is None or session_id is None and whose == (None, None):
            return self._engine
        session = self._pool.get(session_id, whose)
        return session.engine if session is not None else None

    def end_session(self, session_id: Any = None, *, tenant_id: Any = None,
                    user_id: Any = None) -> None:
        """End ``session_id``'s engine session (``on_session_end``) and forget its
        engine; without a session id, end the session of runs that gave none."""
        if self._pool is not None:
            self._pool.end(session_id, _whose({"tenant_id": tenant_id, "user_id": user_id}))

    def reset(self, session_id: Any = None, *, tenant_id: Any = None,
              user_id: Any = None) -> None:
        """``session_id``'s conversation starts over: ``on_session_end`` then
        ``on_session_reset`` on its engine (kept, with its settings)."""
        if self._pool is not None:
            self._pool.reset(session_id, _whose({"tenant_id": tenant_id, "user_id": user_id}))

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
            return "\n\n".join(filter(None, (instructions, ictx.context)))
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
        if isinstance(options, Mapping) and "context" in options:
            if context is not None:
                raise InvalidType("context given twice: in options and as a keyword")
            options = dict(options)
            context = options.pop("context")
        for key in ("run_context", "runContext", "messages"):
            if key in (options if isinstance(options, Mapping) else ()):
                raise InvalidType(f"pass {key!r} as a keyword, not in options")
        given = read_options(_RUN_WORDS, options, keywords, _RUN_KEYS)
        ctx = RunContext.coerce(run_context, **{k: v for k, v in given.items() if v is not None})
        if messages is not None:
            messages = list(messages)
            if any(isinstance(m, Mapping) and m.get("role") == "system" for m in messages[:1]):
                raise InvalidValue("messages must not start with a system message: the agent's "
                                   "instructions are its system message")

        if context is not None and not isinstance(context, (str, Resolution)):
            raise InvalidType(f"context must be a str or a Resolution, got "
                              f"{type(context).__name__}")
        report = context if isinstance(context, Resolution) else None
        if context is None and self.context_providers:
            seen = (self._pass.history(_face.session_key(ctx), messages)
                    if self.dedupe_history and messages else None)
            report = await _face.resolve_with(self._pass, self.context_providers, input, ctx,
                                              session=_face.session_key, history=seen)
        text = report.text if report is not None else context if isinstance(context, str) else ""

        system = await self._resolve_instructions(InstructionContext(text, ctx, input, self.name))
        stored = _face.copy_messages(messages) if messages is not None else []
        if system:
            stored.insert(0, _face.ensure_uid(_face.system_message(system)))
        conversation = _face.Conversation(stored, name=self.name)
        # The same recorded turn a Branch's communicate runs, in this session's engine.
        pool = self._pool
        async with (pool.session(ctx.session_id, _whose(ctx)) if pool else nullcontext()) \
                as session, \
                _face.Turn(conversation, self.model, _face.Instruction(input), session=session,
                           run_context=ctx) as turn:
            await turn.exchange(**self.model_settings)
            turn.store()
        response = turn.response
        assert response is not None and turn.sent is not None  # the turn returned normally
        stored = conversation.messages
        history = stored[1:] if system and stored and stored[0].get("role") == "system" else stored
        return RunResult(
            output=response.text, usage=response.usage, context_report=report,
            messages=turn.sent, context=text, system=system or None, run_context=ctx,
            response=response, agent=self.name, history=list(history),
        )


def _whose(ctx: Any) -> Hashable:
    """The tenant and user a run context names (the bound one filling in), as keys."""
    return _face.session_key(ctx)[:2]

"""Face two: agentium's ``resolveContextProviders``, on the same engine.

Every provider's ``fetch(query, ctx)`` runs concurrently with allSettled semantics:
one that raises, times out or returns ``None``/``""`` is left out, the others are
each wrapped in ``<context name="...">`` tags (see :mod:`lionctx.render` for the
escaping) and joined with a blank line in the order of the ``providers`` list, never
in completion order. Nothing returned gives ``""``.

Beyond the page: an optional per-provider ``timeout``, an overall ``deadline``, a
token ``budget`` (greedy in list order, counted on the tagged blocks), a
concurrency ``limit``, and :func:`resolve_context`, which also returns the
per-provider outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter
from typing import Any, Optional, Union

from ._exceptions import InvalidType
from .adapters import fetch_invoker, provider_name
from .context import coerce_run_context
from .gather import Observer, ProviderCall, gather, validate_max_chars, validate_seconds
from .outcome import Outcome, Status
from .registry import build_report, check_limit, check_number
from .render import join_tagged, tag_block
from .tokens import TokenCounter, resolve_counter

__all__ = ["Resolution", "resolve_context", "resolve_context_providers"]

Number = Union[int, float]


@dataclass(frozen=True)
class Resolution:
    """The merged context string and what happened to each provider."""

    text: str
    outcomes: list[Outcome] = field(default_factory=list)
    budget: Optional[Number] = None
    used_tokens: int = 0
    duration_ms: float = 0.0
    """Wall time of the pass, not counting the one-time tokenizer load."""
    tokenizer_load_ms: float = 0.0
    """Time spent loading the token encoding (the first pass in a process only)."""

    def __str__(self) -> str:
        return self.text

    @property
    def fired(self) -> list[str]:
        """Names whose blocks are in ``text``, in order."""
        return [o.name for o in self.outcomes if o.status is Status.FIRED]

    def to_dict(self, *, include_text: bool = False) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "text": self.text,
            "budget": self.budget,
            "used_tokens": self.used_tokens,
            "duration_ms": self.duration_ms,
            "tokenizer_load_ms": self.tokenizer_load_ms,
            "outcomes": [o.to_dict(include_text=include_text) for o in self.outcomes],
        }


async def resolve_context(
    providers: Sequence[Any],
    query: str,
    ctx: Any = None,
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    budget: Optional[Number] = None,
    limit: Optional[int] = None,
    counter: Union[str, TokenCounter, None] = None,
    on_outcome: Optional[Observer] = None,
    max_chars: Optional[int] = None,
) -> Resolution:
    """Resolve ``providers`` for ``query`` and return the string with its outcomes.

    ``ctx`` is a :class:`~lionctx.context.RunContext`, or any mapping or object shaped
    like one (snake_case or camelCase keys); providers receive a RunContext.
    ``timeout`` and ``deadline`` are seconds. With ``budget``, blocks are admitted
    greedily in list order until the budget (tokens of the tagged blocks) is spent.
    ``on_outcome`` is called with each provider's outcome as soon as it is known.
    ``max_chars`` is the size limit of one provider's text (default 1,000,000
    characters): longer text is skipped uncounted.
    """
    if isinstance(providers, (str, bytes)) or not isinstance(providers, Sequence):
        raise InvalidType(f"providers must be a list of context providers, got {providers!r}")
    if not isinstance(query, str):
        raise InvalidType(f"query must be a str, got {type(query).__name__}")
    timeout = validate_seconds(timeout, "timeout")
    deadline = validate_seconds(deadline, "deadline")
    budget = check_number(budget, "budget", allow_none=True)
    limit = check_limit(limit)
    max_chars = validate_max_chars(max_chars)
    started = perf_counter()
    run_ctx = coerce_run_context(ctx)
    calls = []
    for provider in providers:
        name = provider_name(provider, agentium=True)
        calls.append(ProviderCall(name, provider, fetch_invoker(provider),
                                  partial(tag_block, name)))
    timing: dict[str, float] = {}
    outcomes = await gather(calls, counter=resolve_counter(counter), concurrent=True,
                            timeout=timeout, deadline=deadline, limit=limit,
                            observe=on_outcome, budget=budget, max_chars=max_chars,
                            timing=timing, args=(query, run_ctx))
    report = build_report(outcomes, budget)
    text = join_tagged(report.blocks)
    load = timing.get("tokenizer_load_ms", 0.0)
    return Resolution(text, outcomes, budget, report.used_tokens,
                      (perf_counter() - started) * 1000.0 - load, load)


async def resolve_context_providers(
    providers: Sequence[Any],
    query: str,
    ctx: Any = None,
    **options: Any,
) -> str:
    """agentium's ``resolveContextProviders``: the merged ``<context>`` string.

    Accepts the same keyword options as :func:`resolve_context`.
    """
    return (await resolve_context(providers, query, ctx, **options)).text

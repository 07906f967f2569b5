"""Example third-party context engine ``topic``: per-request selection by topic.

Each request keeps the system prompt, the current exchange (the incoming message and
any tool calls of this turn), the ``keep_recent`` most recent earlier exchanges (none
by default), and the earlier exchanges that share keywords with the incoming
message, most related first, within the token budget.
Exchanges about other topics stay in the stored history but are left out of this
request. A follow-up without topic words ("and how long?") inherits the topic of
the last finished turn, which :meth:`TopicEngine.on_turn_complete` remembers.

Compaction is delegated to lionctx's built-in compressor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lionctx.engines import ContextCompressor, ContextEngine, message_tokens

from .topics import message_keywords, overlap


def _exchanges(messages: list[dict[str, Any]], start: int) -> list[list[dict[str, Any]]]:
    """Split at user messages: a user message and everything up to the next one.

    Splitting only before user messages keeps tool calls with their results.
    """
    groups: list[list[dict[str, Any]]] = []
    for message in messages[start:]:
        if message.get("role") == "user" or not groups:
            groups.append([])
        groups[-1].append(message)
    return groups


class TopicEngine(ContextEngine):
    """Keep only the earlier exchanges about the incoming message's topic."""

    def __init__(self, *, context_length: int = 128_000, keep_recent: int = 0,
                 max_selected_tokens: int | None = None) -> None:
        self.context_length = context_length
        self.keep_recent = keep_recent
        self.max_selected_tokens = max_selected_tokens
        self._compressor = ContextCompressor(context_length=context_length)
        self.threshold_tokens = self._compressor.threshold_tokens
        self.last_topic: set[str] = set()

    @property
    def name(self) -> str:
        return "topic"

    # Compaction: the built-in compressor does it.
    def update_from_response(self, usage: Mapping[str, Any]) -> None:
        self._compressor.update_from_response(usage)
        self.last_prompt_tokens = self._compressor.last_prompt_tokens
        self.last_completion_tokens = self._compressor.last_completion_tokens
        self.last_total_tokens = self._compressor.last_total_tokens

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        return self._compressor.should_compress(prompt_tokens)

    def compress(self, messages: list[dict[str, Any]], current_tokens: int | None = None,
                 focus_topic: str | None = None) -> list[dict[str, Any]]:
        result = self._compressor.compress(messages, current_tokens, focus_topic)
        self.compression_count = self._compressor.compression_count
        return result

    # Per-request selection.
    def select_context(self, request_messages: list[dict[str, Any]], *,
                       conversation_messages: list[dict[str, Any]] | None = None,
                       incoming_message: dict[str, Any] | None = None,
                       budget_tokens: int = 0) -> list[dict[str, Any]] | None:
        topic = message_keywords(incoming_message) or self.last_topic
        if not topic:
            return None  # no topic to route by: leave the request alone
        n_system = 0
        while n_system < len(request_messages) and request_messages[n_system].get("role") in (
            "system", "developer"
        ):
            n_system += 1
        groups = _exchanges(request_messages, n_system)
        if len(groups) <= 1 + self.keep_recent:
            return None

        budget = budget_tokens or 0
        if self.max_selected_tokens:
            budget = min(budget, self.max_selected_tokens) if budget else self.max_selected_tokens

        def size(group: list[dict[str, Any]]) -> int:
            return sum(message_tokens(m) for m in group)

        # Always: the system prompt, the current exchange, the most recent ones.
        keep = set(range(len(groups) - 1 - self.keep_recent, len(groups)))
        used = sum(size(m) for m in ([request_messages[:n_system]] + [groups[i] for i in keep]))
        # Then related exchanges, most related first, newer first on ties.
        scored = []
        for index, group in enumerate(groups):
            if index in keep:
                continue
            score = max(overlap(topic, message_keywords(m)) for m in group)
            if score > 0:
                scored.append((-score, -index, index))
        for _, _, index in sorted(scored):
            cost = size(groups[index])
            if budget and used + cost > budget:
                continue
            keep.add(index)
            used += cost
        if len(keep) == len(groups):
            return None  # nothing to leave out: same request, same prompt cache
        selected = request_messages[:n_system]
        for index in sorted(keep):
            selected.extend(groups[index])
        return selected

    def on_turn_complete(self, messages: list[dict[str, Any]], usage: dict[str, Any] | None = None,
                         **kwargs: Any) -> None:
        for message in reversed(messages):
            if message.get("role") == "user":
                words = message_keywords(message)
                if words:
                    self.last_topic = words
                return

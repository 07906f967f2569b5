"""The built-in context engine: summarize the middle of a long conversation.

When a prompt reaches the threshold (``threshold_percent`` of the model's context
window, 50% by default, never below a floor), :meth:`ContextCompressor.compress`
keeps, verbatim and in order:

- the system prompt (the leading system/developer messages),
- the head: the first ``protect_first_n`` (3) messages after it,
- the tail: up to ``protect_last_n`` (20) most recent messages, as many as fit in
  ``tail_percent`` of the threshold (at least the last message's group),
- the last user message and any later system message, wherever they sit,

and replaces everything else with one summary message placed right after the head.
An assistant message with ``tool_calls`` and the tool results that follow it form
one group that is kept or summarized whole, so a call is never split from its results.

The summary comes from ``model.complete_sync(messages)`` (any object whose result has
``.content``; the same adapter the host chats with) or from a ``summarize(messages,
previous_summary)`` callable. It aims at ``summary_percent`` (20%) of the threshold
and is cut there. On a later pass the previous summary (the marked message right
after the head, where every pass puts it) is updated rather than stacked; a marked
message anywhere else is ordinary text, so pasting or echoing the marker cannot
make the engine swallow a message. If summarizing fails (it raises, returns nothing, or no
summarizer was
given) a fixed fallback note takes its place, so the turn is never lost.

Identity: the summary is an engine-authored row, not a fold of the messages it
replaces (their text does not live on in it), so it carries its own fresh
``message_uid`` stamped by the engine. An updated summary is a rewrite of the same
row and keeps that uid; when several earlier summaries are folded into one, the
first keeps its uid and the others are recorded in ``_absorbed_message_uids``.
Kept messages are copied with all their fields, uids included. The uids of the
messages a pass summarized are available as :attr:`ContextCompressor.last_summarized_uids`.

Tokens are counted with :func:`lionctx._tokens.count_tokens` (o200k_base) over each
message's content, name and tool calls; persistence-only fields are never counted.

Layout: which messages a pass summarizes is :mod:`lionctx.engines._compaction`'s and
the summary's text (request, cut, message, uid) :mod:`lionctx.engines._summary`'s,
both pure; this module holds the settings, calls the summarizer and assembles the
new history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._exceptions import InvalidType, InvalidValue
from .._tokens import TokenCounter, resolve_counter
from ._base import ContextEngine, usage_counts
from ._compaction import CompactionPlan, message_tokens, plan_compaction, role, units
from ._identity import UID_FIELD, is_uid, new_uid
from ._summary import (
    FALLBACK_NOTE,
    SUMMARY_MARKER,
    SUMMARY_ROLES,
    cut_to_tokens,
    fallback_text,
    response_text,
    summarizer_request,
    summary_body,
    summary_message,
)

__all__ = [
    "FALLBACK_NOTE",
    "SUMMARY_MARKER",
    "ContextCompressor",
    "Summarizer",
    "message_tokens",
]

from .._log import logger_for

logger = logger_for(__name__)

#: ``summarize(messages_to_fold, previous_summary) -> summary text``.
Summarizer = Callable[[list[dict[str, Any]], "str | None"], str]


def _check_int(name: str, value: object, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise InvalidValue(f"{name} must be >= {minimum}, got {value!r}")
    return value


def _check_fraction(name: str, value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InvalidType(f"{name} must be a number, got {value!r}")
    if not 0 < value <= 1:
        raise InvalidValue(f"{name} must be in (0, 1], got {value!r}")
    return float(value)


class ContextCompressor(ContextEngine):
    """Built-in engine ``"compressor"``: summarize the middle, keep both ends.

    Args:
        model: an adapter with ``complete_sync(messages)`` returning an object with
            ``.content`` (e.g. ``lionctx.models.OpenAIChatModel``); used to write
            summaries. Shared, not copied, by :meth:`clone_for_agent`.
        summarize: alternatively, ``summarize(messages, previous_summary) -> str``.
            It does not receive ``focus_topic``; the model path puts it in the prompt.
        context_length: the model's context window in tokens.
        threshold_percent: compaction triggers at this share of the window.
        threshold_floor: the threshold is never below ``min(threshold_floor,
            context_length)``.
        protect_first_n: messages after the system prompt kept verbatim.
        protect_last_n: most recent messages kept verbatim, at most.
        tail_percent: token budget of that recent tail, as a share of the threshold.
        summary_percent: summary target, as a share of the threshold.
        counter: token counter (default: lionctx's o200k_base counter).
        max_message_chars: longest text of one message sent to the summarizer; longer
            texts are shortened in the middle.
    """

    def __init__(
        self,
        *,
        model: Any = None,
        summarize: Summarizer | None = None,
        context_length: int = 128_000,
        threshold_percent: float = 0.5,
        threshold_floor: int = 4096,
        protect_first_n: int = 3,
        protect_last_n: int = 20,
        tail_percent: float = 0.3,
        summary_percent: float = 0.2,
        counter: str | TokenCounter | None = None,
        max_message_chars: int = 4000,
    ) -> None:
        if model is not None and not callable(getattr(model, "complete_sync", None)):
            raise InvalidType(
                f"model must have a complete_sync(messages) method, got {type(model).__name__}"
            )
        if summarize is not None and not callable(summarize):
            raise InvalidType(f"summarize must be callable, got {summarize!r}")
        if model is not None and summarize is not None:
            raise InvalidValue("give either model or summarize, not both")
        self.model = model
        self.summarize = summarize
        self.context_length = _check_int("context_length", context_length, 1)
        self.threshold_percent = _check_fraction("threshold_percent", threshold_percent)
        self.threshold_floor = _check_int("threshold_floor", threshold_floor, 0)
        self.protect_first_n = _check_int("protect_first_n", protect_first_n, 0)
        self.protect_last_n = _check_int("protect_last_n", protect_last_n, 1)
        self.tail_percent = _check_fraction("tail_percent", tail_percent)
        self.summary_percent = _check_fraction("summary_percent", summary_percent)
        self.max_message_chars = _check_int("max_message_chars", max_message_chars, 200)
        self._counter_spec = counter
        self._count = resolve_counter(counter)
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.compression_count = 0
        #: uids of the messages the last pass replaced with the summary.
        self.last_summarized_uids: list[str] = []
        #: uid of the current summary message, once a pass has run.
        self.summary_uid: str | None = None
        self._recompute_threshold()

    # -- contract -------------------------------------------------------------------

    @property
    def name(self) -> str:
        return "compressor"

    @property
    def summary_target_tokens(self) -> int:
        """How long a summary may be, in tokens."""
        return max(64, int(self.threshold_tokens * self.summary_percent))

    @property
    def tail_budget_tokens(self) -> int:
        """Token budget of the verbatim recent tail."""
        return max(1, int(self.threshold_tokens * self.tail_percent))

    def _recompute_threshold(self) -> None:
        floor = min(self.threshold_floor, self.context_length)
        self.threshold_tokens = max(int(self.context_length * self.threshold_percent), floor)

    def update_from_response(self, usage: Mapping[str, Any]) -> None:
        counts = usage_counts(usage)
        if counts is None:
            return
        self.last_prompt_tokens, self.last_completion_tokens, self.last_total_tokens = counts

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        return self.threshold_tokens > 0 and tokens >= self.threshold_tokens

    def update_model(
        self,
        model: str | None = None,
        *,
        context_length: int | None = None,
        **kwargs: Any,
    ) -> None:
        if context_length is not None:
            _check_int("context_length", context_length, 1)
        super().update_model(model, context_length=context_length, **kwargs)
        self._recompute_threshold()

    def on_session_reset(self) -> None:
        super().on_session_reset()
        self.last_summarized_uids = []
        self.summary_uid = None

    def clone_for_agent(self) -> ContextCompressor:
        """Same settings and the same (shared) model or summarizer; fresh counters."""
        return ContextCompressor(
            model=self.model,
            summarize=self.summarize,
            context_length=self.context_length,
            threshold_percent=self.threshold_percent,
            threshold_floor=self.threshold_floor,
            protect_first_n=self.protect_first_n,
            protect_last_n=self.protect_last_n,
            tail_percent=self.tail_percent,
            summary_percent=self.summary_percent,
            counter=self._counter_spec,
            max_message_chars=self.max_message_chars,
        )

    # -- compaction -----------------------------------------------------------------

    def is_summary(self, message: Mapping[str, Any]) -> bool:
        """True when ``message`` looks like a summary this engine (or an earlier run of
        it) wrote: it is the current summary row, or a user/assistant message whose
        text starts with :data:`SUMMARY_MARKER`.

        Anyone can type the marker, so :meth:`compress` trusts a marked message as an
        earlier summary only where this engine puts summaries: right after the
        protected head (or under the uid of the current summary row).
        """
        uid = message.get(UID_FIELD)
        if is_uid(uid) and uid == self.summary_uid:
            return True
        content = message.get("content")
        return (
            role(message) in SUMMARY_ROLES
            and isinstance(content, str)
            and content.startswith(SUMMARY_MARKER)
        )

    def plan_compaction(self, messages: Sequence[Mapping[str, Any]]) -> CompactionPlan:
        """Which messages a :meth:`compress` pass would summarize now (nothing is written).

        See :func:`~lionctx.engines._compaction.plan_compaction`: the head, tail and
        token budget come from this engine's settings.
        """
        return plan_compaction(
            messages,
            protect_first_n=self.protect_first_n,
            protect_last_n=self.protect_last_n,
            tail_budget=self.tail_budget_tokens,
            tokens=self._tokens,
            is_summary=self.is_summary,
            summary_uid=self.summary_uid,
            uid_field=UID_FIELD,
        )

    def compress(
        self,
        messages: list[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
    ) -> list[dict[str, Any]]:
        """Return a compacted copy of ``messages`` (see the module docstring).

        ``messages`` is not modified. When nothing between the protected head and
        tail can be summarized, an equal copy is returned and nothing is counted.
        """
        _check_messages(messages, focus_topic)
        plan = self.plan_compaction(messages)
        if not plan.summarizes:
            logger.debug("compress: nothing between head and tail to summarize")
            return [dict(m) for m in messages]
        previous = [messages[i] for i in plan.previous]
        folded = [messages[i] for i in plan.folded]
        kept = [messages[i] for i in plan.kept]
        tokens_before = (
            current_tokens
            if isinstance(current_tokens, int) and not isinstance(current_tokens, bool)
            else sum(self._tokens(m) for m in messages)
        )
        previous_text = "\n\n".join(summary_body(m) for m in previous) or None
        summary = summary_message(self._write_summary(folded, previous_text, focus_topic),
                                  previous, *_neighbours(messages, plan, kept), new_uid)
        result = [
            *(dict(m) for m in messages[:plan.head_end]),  # system prompt and head
            summary,
            *(dict(m) for m in kept),
            *(dict(m) for m in messages[plan.tail_start:]),
        ]
        self.compression_count += 1
        self.summary_uid = summary[UID_FIELD]
        self.last_summarized_uids = [m[UID_FIELD] for m in folded if is_uid(m.get(UID_FIELD))]
        tokens_after = sum(self._tokens(m) for m in result)
        # Until the next response reports real usage, the estimate stands in, so
        # should_compress() does not fire again on the stale pre-compaction count.
        self.last_prompt_tokens = tokens_after
        logger.info(
            "compressor: folded %d message(s) into a summary, ~%d -> ~%d tokens",
            len(folded),
            tokens_before,
            tokens_after,
        )
        return result

    # -- pieces ---------------------------------------------------------------------

    def _tokens(self, message: Mapping[str, Any]) -> int:
        return message_tokens(message, self._count)

    @staticmethod
    def _units(messages: Sequence[Mapping[str, Any]], start: int) -> list[tuple[int, int]]:
        """Index ranges of groups: one message plus the tool results right after it."""
        return units(messages, start)

    def _write_summary(
        self,
        folded: list[dict[str, Any]],
        previous: str | None,
        focus_topic: str | None,
    ) -> str:
        """The summarizer's text, cut to the target; the fallback note if it fails."""
        target = self.summary_target_tokens
        text: object = None
        try:
            if self.summarize is not None:
                text = self.summarize([dict(m) for m in folded], previous)
            elif self.model is not None:
                text = response_text(self.model.complete_sync(summarizer_request(
                    folded, previous, focus_topic, target, self.max_message_chars)))
            else:
                logger.warning("compressor: no model to summarize with; inserting a fallback note")
                return fallback_text(previous)
        except Exception as exc:
            logger.warning(
                "compressor: summarizing failed (%s); inserting a fallback note",
                type(exc).__name__,
            )
            return fallback_text(previous)
        if isinstance(text, str) and text.strip():
            return cut_to_tokens(text.strip(), target, self._count)
        logger.warning("compressor: the summarizer returned no text; inserting a fallback note")
        return fallback_text(previous)


def _check_messages(messages: object, focus_topic: object) -> None:
    if not isinstance(messages, list):
        raise InvalidType(f"messages must be a list of dicts, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidType(f"messages[{index}] must be a dict, got {type(message).__name__}")
    if focus_topic is not None and not isinstance(focus_topic, str):
        raise InvalidType(f"focus_topic must be a str or None, got {focus_topic!r}")


def _neighbours(
    messages: Sequence[Mapping[str, Any]], plan: CompactionPlan, kept: Sequence[Mapping[str, Any]]
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """The messages right before and right after where the summary goes."""
    before = messages[plan.head_end - 1] if plan.head_end else None
    if kept:
        return before, kept[0]
    return before, messages[plan.tail_start] if plan.tail_start < len(messages) else None

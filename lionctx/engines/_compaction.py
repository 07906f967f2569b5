"""The compressor's planning, pure: which messages a compaction pass summarizes.

:func:`plan_compaction` looks at a conversation and returns a :class:`CompactionPlan`:
the leading system prompt, the protected head, earlier summaries, the messages to
fold into the new summary, the messages kept in the middle (the last user message,
system messages) and the protected tail. It writes nothing, calls no model, and
changes no state: the same messages and settings give the same plan. Writing the
summary and assembling the new history is
:meth:`~lionctx.engines._compressor.ContextCompressor.compress`'s.

:func:`message_tokens` is the size the compressor measures a message by (what
``tokens`` counts in a plan).

Every category is made of whole *units*: a message plus the tool results right after
it, so a tool call and its results always land in the same place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._tokens import TokenCounter, resolve_counter

__all__ = ["CompactionPlan", "message_tokens", "plan_compaction", "role", "units"]

SYSTEM_ROLES = frozenset({"system", "developer"})
RESULT_ROLES = frozenset({"tool", "function"})
#: Approximate per-message framing tokens of the chat format.
MESSAGE_OVERHEAD = 4
#: Flat estimate for a non-text content part (an image, audio).
MEDIA_PART_TOKENS = 85


def role(message: Mapping[str, Any]) -> str | None:
    """The message's role, stripped and lower-cased; None when it has no string role."""
    value = message.get("role")
    return value.strip().lower() if isinstance(value, str) else None


def message_tokens(message: Mapping[str, Any], counter: TokenCounter | None = None) -> int:
    """Estimated prompt tokens of one chat message.

    Counts the content (text parts exactly, other parts at a flat rate), ``name``, and
    each tool call's function name and arguments, plus a small framing overhead.
    Persistence-only fields (``message_uid`` and friends) are never counted.
    """
    count = resolve_counter(counter)
    total = MESSAGE_OVERHEAD + _content_tokens(message.get("content"), count)
    name = message.get("name")
    if isinstance(name, str):
        total += count(name)
    for call in message.get("tool_calls") or ():
        total += _call_tokens(call, count)
    return total


def _content_tokens(content: object, count: Callable[[str], int]) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return count(content)
    if not isinstance(content, list):
        return count(str(content))
    total = 0
    for part in content:
        if isinstance(part, str):
            total += count(part)
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            total += count(part["text"])
        else:
            total += MEDIA_PART_TOKENS
    return total


def _call_tokens(call: object, count: Callable[[str], int]) -> int:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return 0
    total = 0
    for key in ("name", "arguments"):
        value = function.get(key)
        if isinstance(value, str):
            total += count(value)
        elif value is not None:
            total += count(json.dumps(value, default=str))
    return total


def units(messages: Sequence[Mapping[str, Any]], start: int) -> list[tuple[int, int]]:
    """Index ranges ``[start, end)`` of groups: one message plus the tool results after it."""
    found = []
    index = start
    while index < len(messages):
        end = index + 1
        while end < len(messages) and role(messages[end]) in RESULT_ROLES:
            end += 1
        found.append((index, end))
        index = end
    return found


@dataclass(frozen=True)
class CompactionPlan:
    """Where each message of a conversation goes in one compaction pass.

    Message indexes: ``[0, system_end)`` is the system prompt, ``[system_end,
    head_end)`` the protected head, ``[tail_start, n)`` the protected tail; between
    head and tail each message is in exactly one of ``previous`` (earlier summaries,
    merged into the new one), ``folded`` (summarized) or ``kept`` (copied verbatim
    after the summary). Nothing is summarized when ``folded`` is empty.
    """

    system_end: int
    head_end: int
    previous: tuple[int, ...]
    folded: tuple[int, ...]
    kept: tuple[int, ...]
    tail_start: int

    @property
    def summarizes(self) -> bool:
        """True when the pass has anything to fold into a summary."""
        return bool(self.folded)


def _summary_units(
    messages: Sequence[Mapping[str, Any]],
    groups: list[tuple[int, int]],
    head_end: int,
    is_summary: Callable[[Mapping[str, Any]], bool],
    summary_uid: str | None,
    uid_field: str,
) -> set[int]:
    """Indexes of the units that are earlier summaries.

    The run of marked single messages right after the head (where every pass puts
    its summary), and the current summary row wherever it is. A marked message
    anywhere else (a user pasting a summary, a model echoing one) is ordinary.
    """
    found = set()
    k = head_end
    while k < len(groups) and groups[k][1] - groups[k][0] == 1 and is_summary(
        messages[groups[k][0]]
    ):
        found.add(k)
        k += 1
    if summary_uid is not None:
        for k, (start, end) in enumerate(groups):
            if end - start == 1 and messages[start].get(uid_field) == summary_uid:
                found.add(k)
    return found


def _head_units(messages: Sequence[Mapping[str, Any]], groups: list[tuple[int, int]],
                protect_first_n: int, is_summary: Callable[[Mapping[str, Any]], bool]) -> int:
    """How many units the protected head holds (a summary is never head)."""
    head_end = 0
    head_messages = 0
    while head_end < len(groups) and head_messages < protect_first_n:
        start, end = groups[head_end]
        if end - start == 1 and is_summary(messages[start]):
            break
        head_messages += end - start
        head_end += 1
    return head_end


def _tail_unit(messages: Sequence[Mapping[str, Any]], groups: list[tuple[int, int]],
               head_end: int, summary_units: set[int], protect_last_n: int,
               tail_budget: int, tokens: Callable[[Mapping[str, Any]], int]) -> int:
    """The first unit of the protected tail (``len(groups)`` when the tail is empty)."""
    tail_unit = len(groups)
    tail_messages = 0
    tail_tokens = 0
    while tail_unit > head_end and tail_unit - 1 not in summary_units:
        start, end = groups[tail_unit - 1]
        size = end - start
        cost = sum(tokens(messages[i]) for i in range(start, end))
        fits = tail_messages + size <= protect_last_n and tail_tokens + cost <= tail_budget
        if tail_unit < len(groups) and not fits:
            break  # the last unit is tail whatever it costs
        tail_unit -= 1
        tail_messages += size
        tail_tokens += cost
    return tail_unit


def plan_compaction(
    messages: Sequence[Mapping[str, Any]],
    *,
    protect_first_n: int,
    protect_last_n: int,
    tail_budget: int,
    tokens: Callable[[Mapping[str, Any]], int],
    is_summary: Callable[[Mapping[str, Any]], bool],
    summary_uid: str | None = None,
    uid_field: str = "message_uid",
) -> CompactionPlan:
    """Plan one compaction pass over ``messages`` (see :class:`CompactionPlan`).

    - System prompt: the leading ``system``/``developer`` messages.
    - Head: whole units after it until ``protect_first_n`` messages; a summary is
      never head.
    - Tail: whole units from the end while they fit in ``protect_last_n`` messages
      and ``tail_budget`` tokens (``tokens`` counts one message); the last unit
      always, unless it is a summary. The tail stops at a summary.
    - Between them: earlier summaries go to ``previous``; the last user message
      (not a summary) and system messages are ``kept``; the rest is ``folded``.

    ``tokens`` and ``is_summary`` are called, nothing else; the result depends only
    on the arguments.
    """
    n_system = 0
    while n_system < len(messages) and role(messages[n_system]) in SYSTEM_ROLES:
        n_system += 1
    groups = units(messages, n_system)
    head_end = _head_units(messages, groups, protect_first_n, is_summary)
    summary_units = _summary_units(messages, groups, head_end, is_summary, summary_uid,
                                   uid_field)
    tail_unit = _tail_unit(messages, groups, head_end, summary_units, protect_last_n,
                           tail_budget, tokens)
    summary_starts = {groups[k][0] for k in summary_units}
    last_user = next((index for index in range(len(messages) - 1, n_system - 1, -1)
                      if role(messages[index]) == "user" and index not in summary_starts),
                     None)

    previous: list[int] = []
    folded: list[int] = []
    kept: list[int] = []
    for k in range(head_end, tail_unit):
        start, end = groups[k]
        if k in summary_units:
            previous.append(start)
        elif start == last_user or role(messages[start]) in SYSTEM_ROLES:
            kept.extend(range(start, end))
        else:
            folded.extend(range(start, end))
    return CompactionPlan(
        system_end=n_system,
        head_end=groups[head_end - 1][1] if head_end else n_system,
        previous=tuple(previous),
        folded=tuple(folded),
        kept=tuple(kept),
        tail_start=groups[tail_unit][0] if tail_unit < len(groups) else len(messages),
    )

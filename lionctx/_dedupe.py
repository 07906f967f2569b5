"""Dedupe (``docs/dedupe.md``): a text is injected once per pass (equal once stripped),
and not at all when a system-side message (not the user's, not the leading system one)
holds it as a whole block: its whole text, a paragraph or a ``<context>`` block.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._messages import message_text
from ._outcome import Outcome, Status

__all__ = ["HistoryIndex", "skip_seen", "text_key", "untag"]

#: Roles whose messages the system side wrote (user text is never compared).
SYSTEM_SIDE_ROLES = frozenset({"assistant", "tool", "function", "system", "developer"})

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")
_CONTEXT_OPEN = re.compile(r'<context name="[^"\n]*">\n')
_CONTEXT_CLOSE = "\n</context>"


def text_key(text: str) -> str:
    """What two blocks must share to be the same text: the text, stripped."""
    return text.strip()


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


#: the role of a ``str`` history item: system-side text the caller vouches for
_VOUCHED = object()


def _fingerprint(role: object, text: str) -> bytes:
    return _digest(f"{'' if role is _VOUCHED else role!r}\0{text}")


def _blocks(text: str) -> Iterable[str]:
    """A message's whole blocks, each stripped (empty ones left out)."""
    whole = text.strip()
    if not whole:
        return
    yield whole
    start = 0  # paragraphs found one at a time: a reader takes only as many as it keeps
    for brk in _PARAGRAPH_BREAK.finditer(whole):
        if part := whole[start:brk.start()].strip():
            yield part
        start = brk.end()
    if start and (part := whole[start:].strip()):
        yield part
    pos = 0  # the texts of the <context> blocks, in one linear walk
    while (opening := _CONTEXT_OPEN.search(whole, pos)) is not None:
        end = whole.find(_CONTEXT_CLOSE, opening.end() - 1)
        if end < 0:
            return
        if inner := whole[opening.end():end].strip():
            yield inner
        pos = end + len(_CONTEXT_CLOSE)


class HistoryIndex:
    """Digests of the whole blocks the system side wrote in one conversation, bounded;
    :meth:`update` reads only new messages. Not thread-safe: one per conversation."""

    def __init__(self, max_messages: int = 256, max_blocks: int = 4096) -> None:
        self.max_messages = max_messages
        self.max_blocks = max_blocks
        self.examined = 0
        """Messages read so far (the cause of this index's cost)."""
        self._blocks: OrderedDict[bytes, int] = OrderedDict()  # digest -> message position
        self._count = 0  # messages of the conversation already read
        self._last: bytes | None = None  # fingerprint of the last message read

    def __len__(self) -> int:
        return len(self._blocks)

    def update(self, messages: Sequence[Mapping[str, Any] | str]) -> None:
        """Read the messages new since the last call (a rewritten history: all again)."""
        n = len(messages)
        start = self._count
        if start and (n < start or _fingerprint(*self._look(messages[start - 1])) != self._last):
            self._blocks.clear()
            self._last = None
            start = 0
        for i in range(max(start, n - self.max_messages), n):
            role, text = self._look(messages[i])
            # The leading system message is the instructions, sent every turn: not history.
            if role is _VOUCHED or (isinstance(role, str) and role in SYSTEM_SIDE_ROLES
                                    and not (role == "system" and i == 0)):
                self._remember(text, i)
            if i == n - 1:
                self._last = _fingerprint(role, text)
        self._count = n

    def _look(self, message: Mapping[str, Any] | str) -> tuple[object, str]:
        """One message's role and text (the only place a message is read)."""
        self.examined += 1
        if isinstance(message, str):
            return _VOUCHED, message
        if not isinstance(message, Mapping):
            return None, ""
        try:  # a role as a plain str copy: a subclass's hash, == or repr may raise
            role = message.get("role")
            return (str.__str__(role) if isinstance(role, str) else None), message_text(message)
        except Exception:  # a message that cannot be read is compared with nothing
            return None, ""

    def _remember(self, text: str, position: int) -> None:
        # At most max_blocks of a message, trimmed as they come: never more digests held
        for _, block in zip(range(self.max_blocks), _blocks(text), strict=False):
            key = _digest(block)
            self._blocks.pop(key, None)
            self._blocks[key] = position
            if len(self._blocks) > self.max_blocks:
                self._blocks.popitem(last=False)

    def find(self, text: str) -> int | None:
        """The position of a message holding ``text`` as a whole block, or ``None``."""
        key = text_key(text)
        return self._blocks.get(_digest(key)) if key else None


def skip_seen(outcomes: Sequence[Outcome], index: HistoryIndex,
              body: Callable[[Outcome], str] | None = None) -> list[Outcome]:
    """New rows: each ``fired`` one the system side already holds is ``skipped``
    (``duplicate of message N``); ``body`` gives the text to compare (tag stripped)."""
    rows = list(outcomes)
    if not len(index):
        return rows
    for i, o in enumerate(rows):
        if o.status is not Status.FIRED or o.text is None:
            continue
        if (hit := index.find(body(o) if body is not None else o.text)) is not None:
            rows[i] = o.replace(status=Status.SKIPPED, reason=f"duplicate of message {hit}",
                                digest=None)
    return rows


def untag(name: str, framed: str, tag: Callable[[str, str], str]) -> str:
    """``framed`` without the frame ``tag(name, ...)`` puts around a text, if it has it."""
    head, _, tail = tag(name, "\0").partition("\0")
    if framed.startswith(head) and framed.endswith(tail) and len(framed) >= len(head) + len(tail):
        return framed[len(head):len(framed) - len(tail)]
    return framed

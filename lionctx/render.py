"""Rendering blocks into prompt text. Pure functions.

Tag framing (the agentium shape, and lionctx's default)::

    <context name="NAME">
    TEXT
    </context>

blocks joined by a blank line. ``NAME`` is attribute-escaped (``& < > " '`` and line
breaks become character references), so a name cannot end the attribute or the tag.

Provider text cannot end its own block early or open a fake one: every ``<`` that
starts something a reader could take for a ``context`` tag (``<context``,
``</context``, any case, with whitespace after ``<`` or around the ``/``) is replaced
by ``&lt;``. Nothing else in the text changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "escape_name",
    "join_tagged",
    "neutralize",
    "render_lionagi",
    "tag_block",
]

_TAG_START = re.compile(r"<(?=\s*/?\s*context\b)", re.IGNORECASE)
_NAME_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;",
     "\n": "&#10;", "\r": "&#13;"}
)


def escape_name(name: str) -> str:
    """Escape a provider name for the ``name="..."`` attribute."""
    return name.translate(_NAME_ESCAPES)


def neutralize(text: str) -> str:
    """Defang anything in ``text`` that could open or close a ``context`` tag."""
    if "<" not in text:
        return text
    return _TAG_START.sub("&lt;", text)


def tag_block(name: str, text: str) -> str:
    """Wrap one provider's text in its ``<context name="...">`` tag."""
    return f'<context name="{escape_name(name)}">\n{neutralize(text)}\n</context>'


def join_tagged(blocks: Iterable[str]) -> str:
    """Join tagged blocks with a blank line; ``""`` when there are none."""
    return "\n\n".join(blocks)


def render_lionagi(system: str, blocks: Iterable[str], guidance: str = "") -> str:
    """LionAGI's exact fold: ``system + "\\n".join(blocks) + guidance``, no separators."""
    return system + "\n".join(blocks) + guidance

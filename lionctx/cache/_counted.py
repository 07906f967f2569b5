"""Text that carries its token count (:class:`CountedText`), and who may trust it.

Only code in this process that counted exactly this text makes one. Nothing read from
a shared cache is one: Redis is untrusted, so its text is counted again.
"""

from __future__ import annotations

from typing import Any

from ..providers._base import ProvidedText

__all__ = ["CountedText", "known_token_count", "provided"]


class CountedText(ProvidedText):
    """A :class:`ProvidedText` with the token count of exactly this text."""

    token_count: int | None
    token_encoding: str | None

    def __new__(cls, value: str, *, cached: bool = False, stale: bool = False,
                token_count: int | None = None,
                token_encoding: str | None = None) -> CountedText:
        obj = str.__new__(cls, value)
        obj.cached = cached
        obj.stale = stale
        obj.token_count = token_count
        obj.token_encoding = token_encoding
        return obj


def provided(value: str, *, cached: bool = False, stale: bool = False) -> ProvidedText:
    """``ProvidedText(value, cached=..., stale=...)``, keeping a count ``value`` carries."""
    count = getattr(value, "token_count", None)
    encoding = getattr(value, "token_encoding", None)
    if isinstance(count, int) and isinstance(encoding, str):
        return CountedText(value, cached=cached, stale=stale, token_count=count,
                           token_encoding=encoding)
    return ProvidedText(value, cached=cached, stale=stale)


def known_token_count(text: Any, counter: Any) -> int | None:
    """The count ``text`` carries if it was counted with ``counter``'s encoding, else ``None``
    (the count is of ``text`` itself, not of it framed in a tag).
    """
    if not isinstance(text, CountedText):
        return None
    count, encoding = text.token_count, text.token_encoding
    if type(count) is not int or count < 0 or encoding is None:
        return None
    if getattr(counter, "encoding_name", None) != encoding:
        return None
    return count

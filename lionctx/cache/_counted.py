"""Text that carries its token count: :class:`CountedText`, and who may trust it.

:class:`CountedText` is a :class:`~lionctx.providers._base.ProvidedText` (so a
``str``) with ``token_count`` and ``token_encoding``, made in this process by code
that counted exactly this text. :func:`known_token_count` is what a caller that
counts (gather) asks first: the carried count when it was made with the same
encoding, else ``None`` (count it).

Nothing read from a shared cache is a :class:`CountedText`: Redis is untrusted, so a
value read from :class:`~lionctx.cache.RedisCache` comes back as plain text (a
:class:`ProvidedText` marked ``cached``) and is counted again, and a count stored
beside it is never used (a forged ``tokens: 1`` cannot carry a large text past a
budget).
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
    """The count ``text`` carries if it was counted with ``counter``'s encoding.

    ``counter`` is a counter from :func:`lionctx._tokens.get_counter` (it has
    ``encoding_name``); any other callable gets ``None``, as does text without a
    count. The count is of ``text`` itself: text that is framed (tagged) before it
    is counted needs counting again.
    """
    if not isinstance(text, CountedText):
        return None
    count, encoding = text.token_count, text.token_encoding
    if type(count) is not int or count < 0 or encoding is None:
        return None
    if getattr(counter, "encoding_name", None) != encoding:
        return None
    return count

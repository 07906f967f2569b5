"""Redaction, in one place: what lionctx takes out of log lines, reasons and errors.

Pure functions (and one logging filter) shared by the HTTP provider, the model
adapter, the shared cache, the CLI, the demo and the local test server:

* :func:`public_url`: a URL as a message may show it (scheme, host, port, path;
  never user info, query or fragment; IPv6 hosts keep their brackets);
  :func:`public_httpx_url` the same for an ``httpx.URL``, host as on the wire.
* :func:`redact`: every known secret replaced by ``[redacted]``, longest first.
* :func:`query_secrets`: what of a query string counts as a secret.
* :func:`mask_key`: an API key, and any run of 8+ of its characters, as ``***``.
* :func:`redact_url_passwords`, :func:`redact_query_strings`: patterns for text
  whose secrets are not known in advance.
* :func:`scrub_library_logs`: a filter on the ``httpx``/``httpcore`` loggers that
  takes the secrets of every live owner out of their records.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["MIN_SECRET", "mask_key", "public_httpx_url", "public_url", "query_secrets", "redact",
           "redact_query_strings", "redact_url_passwords", "scrub_library_logs"]

# Values shorter than this are not treated as secrets to scrub from text; scrubbing
# "1" or "on" would garble every message.
MIN_SECRET = 4
# Servers echo keys partly (``sk-proj-abc...****``): a run this long is the key.
KEY_FRAGMENT = 8
REDACTED = "[redacted]"

_URL_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")
_QUERY = re.compile(r"\?[^\s\"]*")


def public_url(url: str, *, mark_query: bool = False,
               unparsable: str = "<unparsable URL>") -> str:
    """``url`` without user info, query or fragment: safe to show in a message.

    The host is lower-cased as :func:`urllib.parse.urlsplit` gives it; an IPv6 host
    keeps its brackets (``http://[::1]:8000/v1``) so the port stays readable. With
    ``mark_query``, a URL that had a query string ends in ``?...``: the reader knows
    something was there, not what. A URL that cannot be parsed (a bad port, an
    unclosed bracket) becomes ``unparsable``.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port is not None:
            netloc = f"{netloc}:{parts.port}"
    except ValueError:
        return unparsable
    shown = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return shown + "?..." if mark_query and parts.query else shown


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``[redacted]``.

    Give the secrets longest first, so a secret's parts go with it.
    """
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def query_secrets(query: str) -> list[str]:
    """What of a query string is secret: all of it, and each parameter's value.

    A redirect may keep one parameter and drop the rest, or spell it another way,
    so each value counts alone, as written, decoded and re-encoded. Values shorter
    than :data:`MIN_SECRET` are left out.
    """
    found = [query]
    for part in query.split("&"):
        _, eq, value = part.partition("=")
        if not eq:
            value = part  # "?TOKEN": a bare value
        for form in {value, unquote(value), unquote_plus(value)}:
            found += [form, quote(form, safe=""), quote_plus(form, safe=""), quote(form)]
    return [f for f in dict.fromkeys(found) if len(f) >= MIN_SECRET]


def mask_key(text: str, key: str | None, fragment: int = KEY_FRAGMENT) -> str:
    """``text`` with ``key``, and any run of ``fragment``+ of its characters, as ``***``."""
    if not key or not text:
        return text
    if key in text:
        text = text.replace(key, "***")
    size = min(fragment, len(key))
    if not any(key[i:i + size] in text for i in range(len(key) - size + 1)):
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        end = i
        # the longest run starting here that is a substring of the key
        while end < len(text) and text[i:end + 1] in key:
            end += 1
        if end - i >= size:
            out.append("***")
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def redact_url_passwords(text: object) -> str:
    """``str(text)`` with the password of every ``scheme://user:password@`` masked."""
    return _URL_PASSWORD.sub(r"\1[redacted]@", str(text))


def redact_query_strings(text: str) -> str:
    """``text`` with every query string (``?`` up to a space or quote) as ``?...``."""
    return _QUERY.sub("?...", text)


class HasSecrets(Protocol):
    """An object whose secrets (longest first) must not appear in library logs."""

    @property
    def _secrets(self) -> Sequence[str]: ...  # read only: a list attribute satisfies it


# Loggers of httpx and httpcore that may print a URL or a header: httpx's request line
# (INFO), httpcore's DEBUG trace of response headers (a redirect's Location included).
# A filter on a parent logger does not see a child's records, so each gets it.
_LIBRARY_LOGGERS = ("httpx", "httpcore", "httpcore.connection", "httpcore.http11",
                    "httpcore.http2", "httpcore.proxy", "httpcore.socks")


class _LibraryLogScrubber(logging.Filter):
    """Takes live owners' secrets out of httpx's and httpcore's own log lines."""

    def __init__(self) -> None:
        super().__init__()
        self.owners: weakref.WeakSet[HasSecrets] = weakref.WeakSet()
        self.lock = threading.Lock()  # httpx may log from worker threads

    def add(self, owner: HasSecrets) -> None:
        with self.lock:
            self.owners.add(owner)

    def filter(self, record: logging.LogRecord) -> bool:
        with self.lock:
            live = list(self.owners)
        secrets = sorted({s for o in live for s in o._secrets}, key=len, reverse=True)
        if secrets:
            message = record.getMessage()
            clean = redact(message, secrets)
            if clean != message:
                record.msg, record.args = clean, None
        return True


_LIBRARY_LOG = _LibraryLogScrubber()


def scrub_library_logs(owner: HasSecrets) -> None:
    """Keep ``owner``'s secrets out of httpx's and httpcore's log records while it lives."""
    existing = [n for n in list(logging.Logger.manager.loggerDict)
                if n.split(".", 1)[0] in ("httpx", "httpcore")]
    for name in dict.fromkeys([*_LIBRARY_LOGGERS, *existing]):
        logger_ = logging.getLogger(name)
        if _LIBRARY_LOG not in logger_.filters:
            logger_.addFilter(_LIBRARY_LOG)
    _LIBRARY_LOG.add(owner)


def public_httpx_url(url: httpx.URL) -> str:
    """An ``httpx.URL`` without its user info and query string, host as on the wire."""
    from ._hosts import url_host

    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url_host(url)}{port}{url.path}"

"""Redaction, one concept: known secrets, URL shapes and personal data taken out of log
lines, reasons and errors, and the filter on httpx's and httpcore's loggers.
"""

from __future__ import annotations

import collections
import logging
import re
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["MIN_SECRET", "mask_key", "public_httpx_url", "public_url", "query_secrets", "redact",
           "redact_query_strings", "redact_url_passwords", "scrub_bounded",
           "scrub_library_logs", "scrub_personal"]

# Shorter values are not scrubbed as secrets: scrubbing "1" or "on" garbles every message.
MIN_SECRET = 4
# Servers echo keys partly (``sk-proj-abc...****``): a run this long is the key.
KEY_FRAGMENT = 8
REDACTED = "[redacted]"
#: Characters read past the limit, so a secret near the end is seen whole.
_MARGIN = 256
#: Up to this many secrets, a text is first searched for each of them whole.
_FEW = 8

_URL_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")
_QUERY = re.compile(r"\?[^\s\"]*")


def public_url(url: str, *, mark_query: bool = False, unparsable: str = "<unparsable URL>") -> str:
    """``url`` without user info, query or fragment (``mark_query``: ``?...`` for a query)."""
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
    """``text`` with each of ``secrets`` (longest first) replaced by ``[redacted]``."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def query_secrets(query: str) -> list[str]:
    """A query string whole, and each value as written, decoded and re-encoded (a redirect
    may respell one), each at least :data:`MIN_SECRET` long."""
    found = [query]
    for part in query.split("&"):
        value = part.partition("=")[2] if "=" in part else part  # "?TOKEN": a bare value
        for form in {value, unquote(value), unquote_plus(value)}:
            found += [form, quote(form, safe=""), quote_plus(form, safe=""), quote(form)]
    return [f for f in dict.fromkeys(found) if len(f) >= MIN_SECRET]


def mask_key(text: str, key: str | None) -> str:
    """``text`` with ``key``, and any run of :data:`KEY_FRAGMENT`+ of its characters, as ``***``."""
    if not key or not text:
        return text
    text = text.replace(key, "***")
    size = min(KEY_FRAGMENT, len(key))
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


# Personal data in text whose secrets are not known. Each pattern starts only where a
# run of its characters starts (a look-behind), and its parts are told apart by a
# character the part before cannot hold, so no run is tried twice: linear in the text.

# scheme://user:password@host/path?query#fragment -> scheme://host/path
_URL_PARTS = re.compile(
    r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://)"  # the scheme
    r"(?:[^\s/?#]*@)?"  # user info, up to the authority's last @
    r"([^\s?#]*)"  # host and path
    r"(?:\?[^\s#]*)?(?:#\S*)?")  # query and fragment
# Authorization: Bearer <token>, Basic <credentials>
_AUTH_SCHEME = re.compile(r"(?i)(?<![A-Za-z0-9_])(bearer|basic|digest|token)(\s+)[^\s\"',;]+")
# password=..., "api_key": "...", secret: ... (a DSN's keyword form included)
_KEY_VALUE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])((?:api[_-]?key|apikey|access[_-]?key|secret(?:[_-]?key)?"
    r"|client[_-]?secret|password|passwd|pwd|pass|token|access[_-]?token"
    r"|refresh[_-]?token|auth(?:orization)?|credentials?|session(?:[_-]?id)?)"
    r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]+")
# The local part: RFC 5322's atext and dots, "/" included (``0/@a.ag`` is an address).
_EMAIL = re.compile(r"(?<![\w.!#$%&'*+/=?^`{|}~\-])[\w.!#$%&'*+/=?^`{|}~\-]*"
                    r"@[\w\-]+(?:\.[\w\-]+)+")
# A run of key characters long enough to be a key: judged by _key_like.
_KEY_RUN = re.compile(r"(?<![A-Za-z0-9_+=\-])[A-Za-z0-9_+=\-]{20,}")
# Keys whose prefix says what they are, however long the rest.
_PREFIXES = r"(?:sk|pk|rk|ghp|gho|ghs|ghu|github_pat|glpat|xox[abposr]|AKIA|ASIA|AIza)[_\-]?"
_KEY_PREFIX = re.compile(r"(?<![A-Za-z0-9_\-])" + _PREFIXES + r"[A-Za-z0-9_\-]{8,}")
# What each pattern needs to be present before it is worth running.
_AUTH_WORDS = ("bearer", "basic", "digest", "token")
_KEY_WORDS = ("key", "secret", "pass", "pwd", "token", "auth", "credential", "session")
_KEY_PREFIX_HINT = re.compile(_PREFIXES + r"[A-Za-z0-9_\-]{8}")
_KEY_RUN_HINT = re.compile(r"[A-Za-z0-9_+=\-]{20}")
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
_EMAIL_SHOWN = "[email]"


def _key_like(found: re.Match[str]) -> str:
    run = found.group()
    return REDACTED if _DIGIT.search(run) and _LETTER.search(run) else run


def scrub_personal(text: str) -> str:
    """``text`` without URL user info, queries and fragments, authorization values,
    ``key=value`` secrets, e-mail addresses and key-like strings. Linear in ``len(text)``."""
    # Each pattern runs only where a look in C says it may match (most messages hold none).
    if "://" in text:
        text = _URL_PARTS.sub(r"\1\2", text)
    low = text.lower()
    if any(word in low for word in _AUTH_WORDS):
        text = _AUTH_SCHEME.sub(rf"\1\2{REDACTED}", text)
    if any(word in low for word in _KEY_WORDS):
        text = _KEY_VALUE.sub(rf"\1{REDACTED}", text)
    if "@" in text:
        text = _EMAIL.sub(_EMAIL_SHOWN, text)
    if _KEY_PREFIX_HINT.search(text):
        text = _KEY_PREFIX.sub(REDACTED, text)
    if _KEY_RUN_HINT.search(text):
        text = _KEY_RUN.sub(_key_like, text)
    return text


def _whole_words(head: str) -> str:
    """``head`` without its last word, which a cut may have split."""
    return head[:max(head.rfind(c) for c in " \t\n\r\f\v") + 1]


def scrub_bounded(text: object, limit: int) -> str:
    """:func:`scrub_personal` over the head of ``text`` (any object), at most ``limit``
    characters out; the word across any cut is dropped."""
    from .._safe_text import plain, safe_text, split_cut

    window = limit + _MARGIN
    raw = cast(str, text) if issubclass(type(text), str) else safe_text(text, window)
    head, size = plain(raw, window)
    head, note = split_cut(head)
    if note or size > window:
        head = _whole_words(head)  # the text went on: its last word may be cut
        note = note or f"... [{size:,} chars]"
    clean = scrub_personal(head)
    if len(clean) + len(note) > limit:
        note = note or f"... [{size:,} chars]"
        clean = _whole_words(clean[:max(limit - len(note), 0)])
    return (clean + note)[:limit]


class HasSecrets(Protocol):
    """An object whose secrets must not appear in library logs."""

    @property
    def _secrets(self) -> Sequence[str]: ...


# httpx's request line and httpcore's header traces may print a URL or a header. A
# parent logger's filter does not see a child's records, so each gets it.
_LIBRARY_LOGGERS = ("httpx", "httpcore", "httpcore.connection", "httpcore.http11",
                    "httpcore.http2", "httpcore.proxy", "httpcore.socks")


class SecretIndex(logging.Filter):
    """Live owners' secrets (each leaves when its owner is collected) and the log filter
    that takes them out: a trie on chunks of :data:`MIN_SECRET` characters, so a position
    costs one look-up per chunk it shares with a secret, however many secrets there are."""

    def __init__(self) -> None:
        super().__init__()
        self.root: _Node = _Node()
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()  # httpx may log from worker threads
        # Collected owners' secrets, removed by the next caller under the lock (a
        # collection may run inside a locked scan, whose thread must not wait).
        self.dead: collections.deque[tuple[str, ...]] = collections.deque()

    def add(self, owner: HasSecrets) -> None:
        """File ``owner``'s secrets until it is collected."""
        secrets = tuple(dict.fromkeys(s for s in owner._secrets
                                      if type(s) is str and len(s) >= MIN_SECRET))
        if not secrets:
            return
        with self.lock:
            self._collect()
            for secret in secrets:
                if secret not in self.counts:
                    self.root.insert(secret)
                self.counts[secret] = self.counts.get(secret, 0) + 1
        weakref.finalize(owner, self.dead.append, secrets)  # atomic; no lock (see above)

    def _collect(self) -> None:
        while self.dead:
            for secret in self.dead.popleft():
                count = self.counts.pop(secret, 1) - 1
                if count:
                    self.counts[secret] = count
                else:
                    self.root.remove(secret)

    def __len__(self) -> int:
        """How many distinct secrets live owners hold."""
        with self.lock:
            self._collect()
            return len(self.counts)

    def redact(self, text: str) -> str:
        """``text`` with every secret found in it (overlaps together) as ``[redacted]``."""
        spans: list[list[int]] = []
        with self.lock:
            self._collect()
            if len(self.counts) <= _FEW and not any(s in text for s in self.counts):
                return text  # a few secrets, none here: looked for in C
            get = self.root.children.get  # most positions start no secret: one look-up
            for i in range(len(text) - MIN_SECRET + 1):
                child = get(text[i:i + MIN_SECRET])
                end = 0 if child is None else child.longest(text, i + MIN_SECRET)
                if end:
                    if spans and i <= spans[-1][1]:
                        spans[-1][1] = max(spans[-1][1], end)
                    else:
                        spans.append([i, end])
        # The text between the spans, joined by the mark.
        cuts = [0, *(i for span in spans for i in span), len(text)]
        return REDACTED.join(text[a:b] for a, b in zip(cuts[::2], cuts[1::2], strict=True))

    def filter(self, record: logging.LogRecord) -> bool:
        if self.counts:
            message = record.getMessage()
            if (clean := self.redact(message)) != message:
                record.msg, record.args = clean, None
        return True


@dataclass(slots=True)
class _Node:
    """A trie node: children by the next chunk; ends (shorter than a chunk) of secrets here."""

    children: dict[str, _Node] = field(default_factory=dict)
    ends: set[str] = field(default_factory=set)

    def insert(self, secret: str) -> None:
        node = self
        cut = len(secret) - len(secret) % MIN_SECRET
        for at in range(0, cut, MIN_SECRET):
            node = node.children.setdefault(secret[at:at + MIN_SECRET], _Node())
        node.ends.add(secret[cut:])

    def remove(self, secret: str) -> None:
        cut = len(secret) - len(secret) % MIN_SECRET
        path = [self]
        for at in range(0, cut, MIN_SECRET):
            path.append(path[-1].children[secret[at:at + MIN_SECRET]])
        path[-1].ends.discard(secret[cut:])
        for at in range(cut - MIN_SECRET, -1, -MIN_SECRET):  # prune what is left empty
            node = path.pop()
            if node.ends or node.children:
                break
            del path[-1].children[secret[at:at + MIN_SECRET]]

    def longest(self, text: str, at: int) -> int:
        """The end of the longest secret through here whose rest starts at ``at`` (0: none)."""
        best = 0
        node: _Node | None = self
        while node is not None:
            for size in range(MIN_SECRET) if node.ends else ():
                rest = text[at:at + size]
                if rest in node.ends:
                    best = at + len(rest)
            node = node.children.get(text[at:at + MIN_SECRET])
            at += MIN_SECRET
        return best


_LIBRARY_LOG = SecretIndex()


def scrub_library_logs(owner: HasSecrets) -> None:
    """Keep ``owner``'s secrets out of httpx's and httpcore's log records while it lives."""
    existing = [n for n in list(logging.Logger.manager.loggerDict)
                if n.split(".", 1)[0] in ("httpx", "httpcore")]
    for name in dict.fromkeys([*_LIBRARY_LOGGERS, *existing]):
        logging.getLogger(name).addFilter(_LIBRARY_LOG)  # once: addFilter skips a filter it has
    _LIBRARY_LOG.add(owner)


def public_httpx_url(url: httpx.URL) -> str:
    """An ``httpx.URL`` without its user info and query string, host as on the wire."""
    from ._http_request import url_host

    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url_host(url)}{port}{url.path}"

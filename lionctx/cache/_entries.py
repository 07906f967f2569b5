"""What RedisCache writes, pure: keys ``NAMESPACE:lionctx:v1:KIND:PART:DIGEST`` (no user id,
query or URL), entries (anything else decodes as :class:`_Garbage`), markers, the lease
scripts and the :class:`Circuit`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Hashable
from typing import Any

from .._exceptions import SharedCacheError

__all__ = ["BOUND_LEASE", "FORMAT", "KEY_VERSION", "NAMESPACE", "PARTS", "RELEASE", "RENEW",
           "Circuit", "MAX_LEASE_BYTES", "MAX_MARKER_BYTES", "MAX_REASON",
           "decode_entry", "digest", "encode_entry", "failure_marker",
           "key_names", "key_prefix", "marker_reason", "milliseconds", "process_local"]

logger = logging.getLogger("lionctx.cache.redis_cache")  # one logger for the shared cache

KEY_VERSION = "v1"
FORMAT = 1
NAMESPACE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
#: The keys of one cache key: the value, the lease, a failure marker, the last good value.
PARTS = ("val", "lease", "err", "last")

# Release the lease only if it is still ours; renew it only if it is still ours.
RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""

# A lease found without an expiry, or a longer one, gets the lease time from now.
BOUND_LEASE = """
local left = redis.call('pttl', KEYS[1])
if left == -1 or left > tonumber(ARGV[1]) then return redis.call('pexpire', KEYS[1], ARGV[1]) end
return 0
"""


class _Garbage(SharedCacheError):
    """A stored value that does not decode; ``wrong_type``: a key of another type."""

    def __init__(self, message: str, *, wrong_type: bool = False) -> None:
        super().__init__(message)
        self.wrong_type = wrong_type


def digest(*parts: Any) -> str:
    """40 hex characters naming ``parts`` (by their repr) without revealing them."""
    material = repr(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(material, digest_size=20, person=b"lionctx-cache").hexdigest()


def process_local(key: Hashable) -> bool:
    """True for a key that means something only in this process (an object's identity)."""
    return " at 0x" in repr(key)


def key_prefix(namespace: str, kind: str) -> str:
    """``NAMESPACE:lionctx:v1:KIND``, the kind folded to ``[a-z0-9_]{1,16}``."""
    label = re.sub(r"[^a-z0-9_]", "_", kind.lower())[:16] or "x"
    return f"{namespace}:lionctx:{KEY_VERSION}:{label}"


def key_names(prefix: str, key_digest: str) -> dict[str, str]:
    """The Redis key of each of :data:`PARTS` for one cache key."""
    return {part: f"{prefix}:{part}:{key_digest}" for part in PARTS}


def milliseconds(seconds: float) -> int:
    """A Redis expiry in whole milliseconds, at least 1 (``PX 0`` is an error)."""
    return max(1, int(seconds * 1000))


def encode_entry(text: str, meta: dict[str, Any]) -> bytes:
    """The stored form of a value: UTF-8 JSON (``tokens``/``encoding`` null, for old readers)."""
    return json.dumps({"format": FORMAT, "text": text, "tokens": None,
                       "encoding": None, "meta": meta},
                      ensure_ascii=False).encode("utf-8", "surrogatepass")


def decode_entry(raw: object, max_bytes: int) -> tuple[str, dict[str, Any]]:
    """The text and metadata of a stored value; else :class:`_Garbage`."""
    if not isinstance(raw, (bytes, str)) or len(raw) > max_bytes:
        raise _Garbage("a stored value that is too large or not bytes")
    try:
        data = json.loads(raw.decode("utf-8", "surrogatepass") if isinstance(raw, bytes) else raw)
        text, count, encoding = data["text"], data["tokens"], data["encoding"]
        meta = data.get("meta") or {}
    except Exception:  # not JSON, not an object, or a field missing
        data = None
    # tokens/encoding: the form an earlier writer gave them; never their value (counted again).
    if not (isinstance(data, dict) and data.get("format") == FORMAT
            and isinstance(text, str) and text and isinstance(meta, dict)
            and (count is None or (type(count) is int and count >= 0))
            and (encoding is None or isinstance(encoding, str))):
        raise _Garbage("a stored value that does not decode")
    return str.__str__(text), meta


#: Characters of a failure reason a marker keeps, and the largest marker read back.
MAX_REASON = 1000
MAX_MARKER_BYTES = 16 * 1024
#: The largest lease value read back (ours are 32 hex characters).
MAX_LEASE_BYTES = 64


def failure_marker(token: str, reason: str) -> str:
    """What a lease owner whose load failed leaves for its waiters (reason cut)."""
    if len(reason) > MAX_REASON:
        reason = f"{reason[:MAX_REASON]}... ({len(reason)} characters)"
    return json.dumps({"token": token, "reason": reason})


def marker_reason(raw: str | bytes, holder: bytes) -> str | None:
    """The reason in a failure marker if lease ``holder`` wrote it, else None (or Garbage)."""
    try:
        data = json.loads(raw)
        token, reason = data["token"], data["reason"]
    except Exception:
        raise _Garbage("a failure marker that does not decode") from None
    if not isinstance(token, str) or not isinstance(reason, str):
        raise _Garbage("a failure marker that does not decode")
    return reason if token.encode() == holder else None


class Circuit:
    """Open after a connection failure; lets calls try Redis again after ``retry_after``."""

    def __init__(self, retry_after: float, clock: Callable[[], float]) -> None:
        self.retry_after = retry_after
        self.clock = clock
        self.opened_at: float | None = None
        self.reason: str | None = None

    def allows(self) -> bool:
        return self.opened_at is None or self.clock() - self.opened_at >= self.retry_after

    def failed(self, reason: str) -> None:
        if self.opened_at is None:
            logger.warning("shared cache unavailable, using in-process caches for %gs: %s",
                           self.retry_after, reason)
        self.opened_at = self.clock()
        self.reason = reason

    def succeeded(self) -> None:
        if self.opened_at is not None:
            logger.info("shared cache reachable again")
        self.opened_at = None
        self.reason = None

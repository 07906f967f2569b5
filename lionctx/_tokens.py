"""Token counting, offline and exact: ``o200k_base`` ships in the package, checked
against the official sha256 on every load (no network, never a silent 0). Special-token
text such as ``<|endoftext|>`` counts as ordinary text (else it would slip past caps)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import itertools
import math
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._exceptions import InvalidType, TokenizerDataError, _CountRefused, _CountStopped
from ._render import prepare_reader, reader_ready

if TYPE_CHECKING:  # pragma: no cover
    import tiktoken

__all__ = ["DEFAULT_ENCODING", "MAX_PIECE", "MAX_UNCUT", "O200K_SHA256", "TokenCounter",
           "TokenizerDataError", "clear_token_cache", "count_bounded", "count_tokens",
           "counter_ready", "get_counter", "prepare_counter", "resolve_counter"]

from ._log import logger_for

logger = logger_for(__name__)

DEFAULT_ENCODING = "o200k_base"
#: sha256 of the official, uncompressed ``o200k_base.tiktoken`` file.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

O200K_FILE = Path(__file__).parent / "data" / "o200k_base.tiktoken.gz"

# The split pattern and special tokens of o200k_base, as OpenAI publishes them.
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

#: Anything that maps text to a token count.
TokenCounter = Callable[[str], int]


_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}
_counters: dict[str, TokenCounter] = {}
_caches: list[Callable[[], None]] = []


def _load_o200k(path: Path = O200K_FILE) -> tiktoken.Encoding:
    import tiktoken  # deferred: importing lionctx must not load the tokenizer

    fix = "reinstall lionctx (pip install --force-reinstall lionctx) to restore it"
    try:
        raw = gzip.decompress(path.read_bytes())
    except FileNotFoundError:
        raise TokenizerDataError(f"tokenizer data file {path} is missing; {fix}") from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TokenizerDataError(f"tokenizer data file {path} is unreadable ({exc}); {fix}"
                                 ) from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise TokenizerDataError(
            f"tokenizer data file {path} is corrupt: sha256 {digest} does not match "
            f"the official o200k_base hash {O200K_SHA256}; {fix}")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    global _LONGEST_TOKEN
    _LONGEST_TOKEN = max(map(len, ranks))
    return tiktoken.Encoding(
        name=DEFAULT_ENCODING,
        pat_str=_O200K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=_O200K_SPECIAL,
    )


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The tiktoken encoding ``name``, loaded once (``o200k_base`` from the bundled,
    hash-checked file; any other through tiktoken, which may need the network)."""
    enc = _encodings.get(name)
    if enc is not None:
        return enc
    with _lock:
        enc = _encodings.get(name)
        if enc is None:
            if name == DEFAULT_ENCODING:
                enc = _load_o200k()
            else:
                import tiktoken

                enc = tiktoken.get_encoding(name)
            _encodings[name] = enc
            logger.debug("loaded tokenizer encoding %s", name)
    return enc


# Counts are memoized (context repeats turn to turn) under (length, secret string
# hash), never the text; past MEMO_SIZE the oldest quarter goes.
MEMO_SIZE = 65_536

# With PYTHONHASHSEED fixed the hash is no longer secret (colliding texts could be
# crafted, and a wrong count lets text past the budget): keys are a BLAKE2b digest then.
_HASH_IS_SECRET = bool(sys.flags.hash_randomization)


def memo_key(text: str) -> tuple[int, int | bytes]:
    """``text``'s memo key (never the text): length and secret hash, else BLAKE2b."""
    if _HASH_IS_SECRET:
        return (len(text), hash(text))
    data = text.encode("utf-8", "surrogatepass")
    return (len(text), hashlib.blake2b(data, digest_size=20).digest())


def get_counter(encoding: str = DEFAULT_ENCODING) -> TokenCounter:
    """A counter for ``encoding`` (loaded on first call), memoized by hash, not text."""
    counter = _counters.get(encoding)
    if counter is not None:
        return counter

    def encode_len(text: str) -> int:
        # encode_ordinary: special-token text is split like any other (disallowed_special=())
        return len(get_encoding(encoding).encode_ordinary(text))

    memo: dict[Any, int] = {}
    _caches.append(memo.clear)

    def remember(key: Any, n: int) -> None:
        memo[key] = n
        if len(memo) > MEMO_SIZE:
            with _lock:
                if len(memo) > MEMO_SIZE:
                    for old in list(itertools.islice(memo, MEMO_SIZE // 4)):
                        memo.pop(old, None)

    def bounded(text: str, bound: float, stop: threading.Event | None = None,
                memoize: bool = True) -> tuple[int, bool]:
        if not memoize:  # the caller looked it up and keeps it under a key of its own
            return _count_in_pieces(encode_len, text, bound, stop)
        key = memo_key(text)
        n = memo.get(key)
        if n is not None:
            return n, True
        n, exact = _count_in_pieces(encode_len, text, bound, stop)
        if exact:
            remember(key, n)
        return n, exact

    def count(text: str) -> int:
        return bounded(text, math.inf)[0]

    count.encoding_name = encoding  # type: ignore[attr-defined]  # read by prepare_counter
    # Read by gather: counts looked up before any thread hop, kept under keys of its own.
    count.memo = memo  # type: ignore[attr-defined]
    count.remember = remember  # type: ignore[attr-defined]
    # Only the bundled encoding's split pattern is known to allow the cut rule below.
    count.count_bounded = bounded if encoding == DEFAULT_ENCODING else None  # type: ignore[attr-defined]
    # Read by gather: encode_ordinary itself, for a text within its bound and tag frames.
    count.bundled = (lambda: get_encoding(encoding)) if encoding == DEFAULT_ENCODING else None  # type: ignore[attr-defined]
    with _lock:
        return _counters.setdefault(encoding, count)


# Where a cut is safe (see safe_cut): a plain space after a character that is not
# white space (the regex engine's \S is exactly "not str.isspace()"), or white space or
# punctuation after a letter or digit (\w but "_": every such character is in \p{L} or
# \p{N}). No alternative of the pattern matches across such a point (a letter run takes
# letters, marks and a contraction; a punctuation run only trailing \r, \n or /; white
# space alternatives start at white space). The character at the cut first: C scans it.
_CUT = re.compile(r"[\s!-&(-/:-@\[-`{-~\u3001\u3002\uff01\uff0c\uff1a\uff1b\uff1f]"
                  r"(?<=[^\W_].|\S )")
#: The longest piece of text counted in one call when counting may be stopped (by the
#: bound or by the turn that gave up on it): the most a stopped count goes on for.
MAX_PIECE = 1 << 17
#: The most characters counted in one call when the count may be stopped, a piece
#: and the stretch to its next cut: a text that needs a longer one is refused.
MAX_UNCUT = 2 * MAX_PIECE
# The longest token of the bundled encoding, in bytes (set when it loads): a text of
# n characters (n or more bytes) is at least n / that many tokens.
_LONGEST_TOKEN = 0


def safe_cut(text: str, at: int) -> int:
    """The first index ``i >= at`` where the o200k split pattern always splits, or -1:
    ``count(text) == count(text[:i]) + count(text[i:])`` (a Hypothesis property; the
    reasoning is at ``_CUT``)."""
    found = _CUT.search(text, max(at, 1))
    return -1 if found is None else found.start()


def _count_in_pieces(encode_len: TokenCounter, text: str, bound: float,
                     stop: threading.Event | None = None) -> tuple[int, bool]:
    """``(exact count, True)``, or ``(n > bound, False)`` once the total passes
    ``bound``. Pieces grow up to :data:`MAX_PIECE`, so a text that cannot fit costs a
    multiple of the bound, not of its length; with ``stop``, a set flag raises
    ``_CountStopped`` between pieces and a piece over :data:`MAX_UNCUT` is refused."""
    if bound == math.inf and stop is None:
        return encode_len(text), True
    total = 0
    pos = 0
    step = max(256, int(min(bound, MAX_PIECE)) * 8)
    n = len(text)
    while pos < n:
        if stop is not None and stop.is_set():
            raise _CountStopped
        size = min(step, MAX_PIECE)
        # with a stop flag, no cut is looked for past MAX_UNCUT (a longer piece is refused)
        far = n if stop is None else pos + MAX_UNCUT + 1
        found = _CUT.search(text, pos + size, far) if pos + size < n else None
        end = min(far, n) if found is None else found.start()
        if _LONGEST_TOKEN and total + -(-(end - pos) // _LONGEST_TOKEN) > bound:
            # Never start a piece that cannot fit however it splits into tokens.
            return total + -(-(end - pos) // _LONGEST_TOKEN), False
        if stop is not None and end - pos > MAX_UNCUT:
            raise _CountRefused(
                f"no place to cut the token count between offsets {pos + size:,} and "
                f"{end:,} (at most {MAX_UNCUT:,} characters are counted in one piece "
                "while the turn may give up on the count): refused uncounted")
        total += encode_len(text[pos:end])
        pos = end
        if total > bound:
            return total, False
        step *= 2
    return total, True


def count_bounded(counter: TokenCounter, text: str, bound: float,
                  stop: threading.Event | None = None,
                  memoize: bool = True) -> tuple[int, bool]:
    """``(count, True)``, or ``(lower_bound, False)`` with ``lower_bound > bound``
    (only the bundled encoding stops early; see :func:`_count_in_pieces`).
    ``memoize=False``: the caller looked the text up and remembers its count itself."""
    fn = getattr(counter, "count_bounded", None)
    if fn is None or (bound == math.inf and stop is None and memoize):
        n = counter(text)  # a caller's counter: checked here, where its answer comes in
        if type(n) is not int or n < 0:
            raise TypeError(f"token counter returned {n!r}, not an int >= 0")
        return n, True
    return fn(text, bound, stop, memoize)  # type: ignore[no-any-return]


def counter_ready(counter: TokenCounter) -> bool:
    """True when counting with ``counter`` and framing need nothing loaded first."""
    name = getattr(counter, "encoding_name", None)
    return (name is None or name in _encodings) and reader_ready()


async def prepare_counter(counter: TokenCounter) -> None:
    """Load a counter's encoding and the tag reader in a worker thread, before any
    provider's timer starts (the first load takes most of a second)."""
    name = getattr(counter, "encoding_name", None)
    load = name is not None and name not in _encodings
    if load or not reader_ready():
        import anyio.to_thread

        def prepare() -> None:
            prepare_reader()
            if isinstance(name, str) and load:
                get_encoding(name)

        await anyio.to_thread.run_sync(prepare)


def clear_token_cache() -> None:
    """Forget every memoized token count."""
    for clear in _caches:
        clear()


def resolve_counter(counter: str | TokenCounter | None) -> TokenCounter:
    """Turn ``None`` (default), an encoding name, or a callable into a counter."""
    if counter is None:
        return get_counter(DEFAULT_ENCODING)
    if isinstance(counter, str):
        return get_counter(counter)
    if callable(counter):
        return counter
    raise InvalidType("counter must be None, a tiktoken encoding name or a callable "
                      f"str -> int, got {counter!r}")


def count_tokens(text: str, encoding: str | TokenCounter | None = None) -> int:
    """Count the tokens of ``text``: ``len(encoding.encode(text, disallowed_special=()))``.

    ``encoding`` is a tiktoken encoding name (default ``o200k_base``, bundled and
    offline) or any callable ``str -> int``.
    """
    if not isinstance(text, str):
        raise InvalidType(f"count_tokens() needs a str, got {type(text).__name__}")
    return resolve_counter(encoding)(text)

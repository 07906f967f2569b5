"""Decoding an HTTP body's ``Content-Encoding`` with the size cap applied as it decodes.

Each layer asks ``zlib`` (``max_length``) for at most what the cap still allows plus one
byte: httpx would decode a whole network chunk first (a gzip bomb).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from .._exceptions import BodyTooLarge, DecodeError

__all__ = ["ACCEPT_ENCODING", "MAX_LAYERS", "BodyDecoder", "BodyTooLarge", "DecodeError",
           "codings"]

DECODED = ("gzip", "deflate")
ACCEPT_ENCODING = "gzip, deflate"
MAX_LAYERS = 2
_ALIASES = {"x-gzip": "gzip"}
_STEP = 64 * 1024  # how much an inner layer hands on to the next at a time
_GZIP_MAGIC = b"\x1f\x8b"


def codings(values: Iterable[str]) -> list[str]:
    """The ``Content-Encoding`` stack in the order applied; an unknown encoding, or more
    than ``MAX_LAYERS``, is a :class:`DecodeError`.
    """
    out: list[str] = []
    for value in values:
        coding = value.strip().lower()
        coding = _ALIASES.get(coding, coding)
        if coding in ("", "identity"):
            continue
        if coding not in DECODED:
            shown = coding if len(coding) <= 40 else coding[:40] + "..."
            raise DecodeError(f"refused: response Content-Encoding {shown!r} is not one this "
                              f"provider decodes ({', '.join(DECODED)})")
        out.append(coding)
    if len(out) > MAX_LAYERS:
        raise DecodeError(f"refused: response has {len(out)} stacked Content-Encodings "
                          f"({', '.join(out)}); at most {MAX_LAYERS} are decoded")
    return out


class _Layer:
    """One ``zlib`` stream: input in bounded pieces, output never over what is asked."""

    def __init__(self, coding: str, limit: int) -> None:
        self.coding = coding
        self.limit = limit  # total output this layer may ever produce
        self.produced = 0
        self.pending = b""  # input not yet given to zlib
        self.more = False  # the last step filled its quota: zlib may hold more output
        self.done = False  # the stream ended; what follows is ignored
        self.final = False  # no more input will come
        self.obj: zlib._Decompress | None = None

    def ready(self) -> bool:
        """Whether ``step`` can make progress without more input."""
        if self.done:
            return False
        if self.obj is None and self.coding == "deflate" and len(self.pending) < 2:
            return self.final and bool(self.pending)  # too short to sniff the header yet
        return bool(self.pending) or self.more

    def give(self, data: bytes) -> None:
        if not self.done:
            self.pending += data

    def _start(self) -> zlib._Decompress:
        if self.coding == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        # "deflate" is meant to be zlib-wrapped, but servers send raw deflate too.
        cmf, flg = (self.pending + b"\0\0")[:2]
        wrapped = cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf * 256 + flg) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)

    def step(self, want: int) -> bytes:
        """At most ``want`` bytes of output from the input given so far."""
        if self.obj is None:
            self.obj = self._start()
        data, self.pending = self.pending, b""
        try:
            out = self.obj.decompress(data, want)
        except zlib.error as exc:
            raise DecodeError(f"could not decode the {self.coding} body: {exc}") from None
        self.pending = self.obj.unconsumed_tail
        self.more = len(out) >= want
        if self.obj.eof:
            rest = self.obj.unused_data
            if self.coding == "gzip" and rest[:1] == _GZIP_MAGIC[:1]:
                # Another gzip member follows (RFC 1952 allows several): decode it too.
                self.obj, self.pending, self.more = None, rest + self.pending, False
            else:
                self.done, self.pending, self.more = True, b"", False  # trailing bytes
        self.produced += len(out)
        if self.produced > self.limit:
            raise BodyTooLarge
        return out


class BodyDecoder:
    """Raw body bytes in, decoded bytes out; :class:`BodyTooLarge` past ``cap`` (a feed
    holds at most about ``cap`` plus 64 KiB per layer).
    """

    def __init__(self, stack: list[str], cap: int) -> None:
        self.cap = cap
        self.total = 0
        # An inner layer's output is compressed input: about the text's size, plus slack.
        inner = cap + cap // 64 + 4096
        self.layers = [_Layer(c, inner) for c in reversed(stack)]
        if self.layers:
            self.layers[-1].limit = cap

    def feed(self, data: bytes) -> bytes:
        """The decoded output of ``data`` (and whatever earlier input still held)."""
        if not self.layers:
            self.total += len(data)
            if self.total > self.cap:
                raise BodyTooLarge
            return data
        self.layers[0].give(data)
        return self._drain()

    def finish(self) -> bytes:
        """The output still held once the raw body has ended."""
        for layer in self.layers:
            layer.final = True
        return self._drain() if self.layers else b""

    def _drain(self) -> bytes:
        out = self._pull(len(self.layers) - 1, self.cap - self.total + 1)
        self.total += len(out)
        if self.total > self.cap:
            raise BodyTooLarge
        return out

    def _pull(self, index: int, want: int) -> bytes:
        """Up to ``want`` bytes out of layer ``index``, pulling input from the one before."""
        layer = self.layers[index]
        out = bytearray()
        while len(out) < want:
            if layer.ready():
                out += layer.step(want - len(out))
                continue
            if index == 0 or layer.done:
                break
            more = self._pull(index - 1, _STEP)
            if not more:
                break
            layer.give(more)
        return bytes(out)

"""An HTTP body's ``Content-Encoding`` decoded 64 KiB at a time per layer (zlib's
``max_length``), the cap checked after each piece: httpx decodes a whole chunk (a bomb).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

from .._exceptions import BodyTooLarge, DecodeError

__all__ = ["ACCEPT_ENCODING", "MAX_LAYERS", "BodyDecoder", "BodyTooLarge", "DecodeError", "codings"]

DECODED = ("gzip", "deflate")
ACCEPT_ENCODING = "gzip, deflate"
MAX_LAYERS = 2
_ALIASES = {"x-gzip": "gzip"}
_STEP = 64 * 1024  # how much an inner layer hands on to the next at a time
_GZIP_MAGIC = b"\x1f\x8b"


def codings(values: Iterable[str]) -> list[str]:
    """The ``Content-Encoding`` stack as applied; DecodeError if unknown or too deep."""
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
    """One ``zlib`` stream (a gzip body may hold several members), decoded in pieces."""

    def __init__(self, coding: str, limit: int) -> None:
        self.coding = coding
        self.limit = limit  # total output this layer may ever produce
        self.produced = 0
        self.obj: zlib._Decompress | None = None
        self.head = b""  # deflate: input held until its header can be sniffed
        self.done = False  # the stream ended; what follows is ignored
        self.ended = False  # a gzip member ended: only another member may follow

    def _start(self, data: bytes) -> zlib._Decompress:
        if self.coding == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        # "deflate" is meant to be zlib-wrapped, but servers send raw deflate too.
        cmf, flg = (data + b"\0\0")[:2]
        wrapped = cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf * 256 + flg) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)

    def pieces(self, data: bytes, final: bool) -> Iterator[bytes]:
        """The output of ``data`` (and of input held), in pieces of at most ``_STEP`` bytes."""
        if self.obj is None and self.head:
            data, self.head = self.head + data, b""
        more = True  # zlib may hold output when the last piece filled its quota
        while not self.done and (data or (more and self.obj is not None)):
            if self.obj is None:
                if self.coding == "deflate" and len(data) < 2 and not final:
                    self.head = data  # too short to sniff the header yet
                    return
                if self.ended and data[:1] != _GZIP_MAGIC[:1]:
                    self.done = True  # trailing bytes after the last member are ignored
                    return
                self.obj = self._start(data)
            obj = self.obj
            try:
                out = obj.decompress(data, _STEP)
            except zlib.error as exc:
                raise DecodeError(f"could not decode the {self.coding} body: {exc}") from None
            data, more = obj.unconsumed_tail, len(out) >= _STEP
            if obj.eof:
                # Another gzip member may follow (RFC 1952), now or in a later piece.
                data, more, self.obj, self.ended = obj.unused_data, False, None, True
                self.done = self.coding != "gzip"
            self.produced += len(out)
            if self.produced > self.limit:
                raise BodyTooLarge
            if out:
                yield out


class BodyDecoder:
    """Raw body bytes in, decoded out; BodyTooLarge past ``cap`` (+64 KiB a layer held at most)."""

    def __init__(self, stack: list[str], cap: int) -> None:
        self.cap = cap
        self.total = 0
        # An inner layer's output is compressed input: about the text's size, plus slack.
        self.layers = [_Layer(c, cap + cap // 64 + 4096) for c in reversed(stack)]

    def feed(self, data: bytes, final: bool = False) -> bytes:
        """The decoded output of ``data`` (and whatever earlier input still held)."""
        out = bytearray()
        for piece in self._through(0, data, final):
            self.total += len(piece)
            if self.total > self.cap:
                raise BodyTooLarge
            out += piece
        return bytes(out)

    def finish(self) -> bytes:
        """The output still held once the raw body has ended."""
        return self.feed(b"", final=True)

    def _through(self, index: int, data: bytes, final: bool) -> Iterator[bytes]:
        """``data`` through the layers from ``index`` on (``final``: no more input comes)."""
        if index == len(self.layers):
            if data:
                yield data
            return
        for piece in self.layers[index].pieces(data, final):
            yield from self._through(index + 1, piece, False)
        if final:
            yield from self._through(index + 1, b"", True)

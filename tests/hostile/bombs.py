"""Compression bombs and a peak-memory probe, for hostile tests and benchmarks.

``gzip_zeros(1 GiB)`` builds a real gzip stream of a gibibyte of zeros (about 1 MiB)
in a fraction of a second: with a full flush after each 16 MiB block the compressor
starts every block afresh, so every block after the first compresses to the same
bytes, and the stream is the first block, that one repeated, an empty final block
and the trailer (CRC-32 and length of the whole).

``fetch_peak_rss(url)`` fetches ``url`` with an ``HttpContextProvider`` in a fresh
Python process and returns how far the fetch raised that process's peak RSS.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys
import zlib
from typing import Any

GIB = 1 << 30
_BLOCK = 16 << 20


def gzip_zeros(size: int) -> bytes:
    """A gzip stream that decodes to ``size`` zero bytes (a multiple of 16 MiB)."""
    if size <= 0 or size % _BLOCK:
        raise ValueError(f"size must be a positive multiple of 16 MiB, got {size}")
    zeros = bytes(_BLOCK)
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    if c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH) != block:  # pragma: no cover
        raise AssertionError("zlib did not repeat itself after a full flush")
    crc = 0
    for _ in range(size // _BLOCK):
        crc = zlib.crc32(zeros, crc)
    final = b"\x03\x00"  # an empty fixed-Huffman block with BFINAL set
    return first + block * (size // _BLOCK - 1) + final + struct.pack("<II", crc, size % 2**32)


def gzip_gzip_zeros(size: int) -> bytes:
    """``gzip_zeros(size)`` gzipped again: ``Content-Encoding: gzip, gzip``."""
    return gzip.compress(gzip_zeros(size), compresslevel=9)


_CHILD = r"""
import json, resource, sys
import anyio
from lionctx.providers import HttpContextProvider

def peak_kib():
    # VmHWM is this program's own peak (a fresh address space after exec); ru_maxrss
    # would carry over the peak of the parent that forked it, and hide any rise.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

async def main(url, warm, cap):
    # Imports, the client and its TLS context are in place before the baseline.
    async with HttpContextProvider(warm) as w:
        await w.fetch("", None)
    base = peak_kib()
    async with HttpContextProvider(url, max_response_bytes=cap, timeout=60) as p:
        text = await p.fetch("", None)
        error = p.last_error
    peak = peak_kib()
    print(json.dumps({"baseline_kib": base, "peak_kib": peak,
                      "chars": len(text or ""), "error": error}))

anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def fetch_peak_rss(url: str, warm_url: str, max_response_bytes: int = 1 << 20,
                   timeout: float = 120.0) -> dict[str, Any]:
    """Fetch ``url`` in a child Python; its peak RSS rise in MiB, text length, error.

    ``warm_url`` is fetched first (by another provider) so that imports and client
    set-up are part of the baseline, not of the figure.
    """
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, url, warm_url,
                           str(max_response_bytes)], capture_output=True, text=True,
                          timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["rise_mib"] = (out["peak_kib"] - out["baseline_kib"]) / 1024  # ru_maxrss is KiB
    return out

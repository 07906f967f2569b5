"""Fixtures for the host-framework tests: every host offline, pointed at 127.0.0.1."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import pytest

# The URL tiktoken loads o200k_base from; its cache file name is the sha1 of this
# string (tiktoken/load.py, read_file_cached).
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


@pytest.fixture(scope="session", autouse=True)
def offline_tiktoken(tmp_path_factory: pytest.TempPathFactory):
    """Seed TIKTOKEN_CACHE_DIR with lionctx's bundled o200k_base, so hosts that load
    the encoding through tiktoken (LionAGI's tokenizer) never download it."""
    from lionctx._tokens import O200K_FILE

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    key = hashlib.sha1(O200K_URL.encode()).hexdigest()
    (cache / key).write_bytes(gzip.decompress(Path(O200K_FILE).read_bytes()))
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    yield cache
    if old is None:
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)
    else:
        os.environ["TIKTOKEN_CACHE_DIR"] = old


@pytest.fixture(scope="session", autouse=True)
def no_host_telemetry():
    """The OpenAI Agents SDK exports traces to OpenAI by default: turn that off."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    yield

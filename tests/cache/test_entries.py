"""What the shared cache writes (``cache/_entries.py``), pure: keys, entries, markers, circuit.

No Redis here: these are the encodings the lease protocol relies on, as properties.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import SharedCacheError
from lionctx.cache import CountedText
from lionctx.cache._entries import (
    KEY_VERSION,
    PARTS,
    Circuit,
    decode_entry,
    digest,
    encode_entry,
    failure_marker,
    key_names,
    key_prefix,
    marker_reason,
    milliseconds,
    process_local,
)

any_text = st.text(st.characters(blacklist_categories=()), max_size=80)  # surrogates too
json_meta = st.dictionaries(st.text(max_size=8), st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=20)), max_size=3)
counts = st.one_of(st.none(), st.integers(0, 10**9))
encodings = st.one_of(st.none(), st.just("o200k_base"))


# -- keys ---------------------------------------------------------------------------------

@given(st.text(max_size=20), st.text(max_size=20), st.from_regex(r"[a-z0-9_]{1,8}",
                                                                  fullmatch=True))
def test_a_key_name_holds_no_key_material(user: str, query: str, kind: str) -> None:
    key_digest = digest("scope", ("tenant", user, query))
    names = key_names(key_prefix("app", kind), key_digest)
    assert set(names) == set(PARTS)
    for part, name in names.items():
        assert name == f"app:lionctx:{KEY_VERSION}:{kind}:{part}:{key_digest}"
    assert len(key_digest) == 40 and set(key_digest) <= set("0123456789abcdef")
    if len(user) >= 4:
        assert user not in key_digest


@given(st.lists(st.tuples(st.text(max_size=6), st.integers(), st.none() | st.booleans()),
                min_size=2, max_size=10, unique=True))
def test_different_keys_get_different_digests(keys: list[tuple[Any, ...]]) -> None:
    # 1 and True, "1" and 1: equal or alike in Python, different keys here (by repr).
    assert len({digest("scope", key) for key in keys}) == len({repr(k) for k in keys})


@given(st.text(max_size=40))
def test_a_kind_becomes_a_short_safe_label(kind: str) -> None:
    label = key_prefix("ns", kind).split(":")[-1]
    assert 1 <= len(label) <= 16 and set(label) <= set("abcdefghijklmnopqrstuvwxyz0123456789_")


def test_keys_that_mean_something_only_here() -> None:
    assert process_local(object())
    assert process_local(("q", object()))
    assert not process_local(("tenant", "user", None, "query"))


@given(st.floats(0, 10**6, allow_nan=False))
def test_an_expiry_is_at_least_one_millisecond(seconds: float) -> None:
    ms = milliseconds(seconds)
    assert ms >= 1 and ms <= max(1, seconds * 1000)


# -- entries ------------------------------------------------------------------------------

@given(any_text.filter(bool), json_meta)
def test_an_entry_comes_back_exactly(text: str, meta: dict[str, Any]) -> None:
    raw = encode_entry(text, meta)
    for stored in (raw, raw.decode("utf-8", "surrogatepass")):
        back, back_meta = decode_entry(stored, len(raw))
        assert type(back) is str and back == text
        assert back_meta == meta


@given(any_text.filter(bool), counts, encodings, json_meta)
def test_a_stored_count_is_never_carried(text: str, tokens: int | None, encoding: str | None,
                                         meta: dict[str, Any]) -> None:
    # An earlier writer's (or a forger's) count: its form is checked, its value unused.
    raw = json.dumps({"format": 1, "text": text, "tokens": tokens, "encoding": encoding,
                      "meta": meta}, ensure_ascii=False).encode("utf-8", "surrogatepass")
    back, _ = decode_entry(raw, len(raw))
    assert type(back) is str and back == text
    assert not isinstance(back, CountedText) and not hasattr(back, "token_count")


@given(any_text.filter(bool), json_meta)
def test_an_entry_over_the_limit_is_refused(text: str, meta: dict[str, Any]) -> None:
    raw = encode_entry(text, meta)
    with pytest.raises(SharedCacheError):
        decode_entry(raw, len(raw) - 1)


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200),
                 st.builds(json.dumps, st.dictionaries(st.sampled_from(
                     ["format", "text", "tokens", "encoding", "meta"]),
                     st.one_of(st.none(), st.integers(-2, 2), st.text(max_size=4),
                               st.booleans(), st.lists(st.integers(), max_size=2)))),
                 st.integers(), st.none()))
def test_anything_else_is_refused_as_garbage_never_served(raw: Any) -> None:
    try:
        text, meta = decode_entry(raw, 4096)
    except SharedCacheError:
        return
    # What decodes is what encode_entry could have written: the same text and meta.
    assert type(text) is str and text and isinstance(meta, dict)
    data = json.loads(raw)
    assert data["format"] == 1 and data["text"] == text
    assert json.loads(encode_entry(text, meta))["meta"] == meta


@pytest.mark.parametrize("data", [
    {"format": 1, "text": "", "tokens": None, "encoding": None},  # empty text
    {"format": 1, "text": "x", "tokens": -1, "encoding": None},  # negative count
    {"format": 1, "text": "x", "tokens": True, "encoding": None},  # a bool is no count
    {"format": 1, "text": "x", "tokens": 1.0, "encoding": None},
    {"format": 1, "text": "x", "tokens": 1, "encoding": 5},
    {"format": 1, "text": "x", "tokens": 1, "encoding": None, "meta": [1]},
    {"format": 2, "text": "x", "tokens": 1, "encoding": None},  # a later format
    {"text": "x", "tokens": 1, "encoding": None},
])
def test_entries_that_are_refused(data: dict[str, Any]) -> None:
    with pytest.raises(SharedCacheError, match="does not decode"):
        decode_entry(json.dumps(data).encode(), 4096)


# -- failure markers ----------------------------------------------------------------------

tokens_hex = st.from_regex(r"[0-9a-f]{32}", fullmatch=True)


@given(tokens_hex, tokens_hex, any_text)
def test_a_marker_speaks_only_for_the_owner_that_wrote_it(
        token: str, other: str, reason: str) -> None:
    marker = failure_marker(token, reason)
    assert marker_reason(marker, token.encode()) == reason
    assert marker_reason(marker.encode("utf-8", "surrogatepass"), token.encode()) == reason
    if other != token:
        assert marker_reason(marker, other.encode()) is None  # an earlier owner's failure


@pytest.mark.parametrize("raw", [b"", b"[]", b'{"token": 1, "reason": "x"}',
                                 b'{"token": "a"}', b"\xff"])
def test_a_marker_that_does_not_decode_is_garbage(raw: bytes) -> None:
    with pytest.raises(SharedCacheError, match="failure marker"):
        marker_reason(raw, b"a")


# -- the circuit --------------------------------------------------------------------------

@given(st.floats(0, 100, allow_nan=False), st.lists(st.tuples(
    st.sampled_from(["fail", "ok", "ask"]), st.floats(0, 50, allow_nan=False)), max_size=20))
def test_the_circuit_stays_open_for_retry_after_since_the_last_failure(
        retry_after: float, steps: list[tuple[str, float]]) -> None:
    now = [0.0]
    circuit = Circuit(retry_after, lambda: now[0])
    last_failure: float | None = None
    for action, advance in steps:
        now[0] += advance
        if action == "fail":
            circuit.failed("down")
            last_failure = now[0]
        elif action == "ok":
            circuit.succeeded()
            last_failure = None
        expected = last_failure is None or now[0] - last_failure >= retry_after
        assert circuit.allows() == expected
        assert (circuit.reason == "down") == (last_failure is not None)

"""lionctx._messages: message identity and the wire copy."""

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx._messages import (
    PERSISTENCE_ONLY_FIELDS,
    ensure_tool_call_uids,
    ensure_uid,
    is_uid,
    new_uid,
    strip_persistence_fields,
    tool_message,
)
from lionctx.engines import message_text


def test_persistence_fields_are_the_four_named_by_the_engine_spec():
    assert PERSISTENCE_ONLY_FIELDS == {
        "message_uid", "_absorbed_message_uids", "_tool_call_uids", "_tool_call_uid"}


def test_new_uid_is_32_lowercase_hex_and_fresh():
    uids = {new_uid() for _ in range(200)}
    assert len(uids) == 200
    assert all(is_uid(u) for u in uids)
    assert not is_uid("ABC") and not is_uid("g" * 32) and not is_uid(None)


def test_ensure_uid_mints_once_and_keeps_an_existing_uid():
    msg = {"role": "user", "content": "hi"}
    same = ensure_uid(msg)
    assert same is msg and is_uid(msg["message_uid"])
    first = msg["message_uid"]
    ensure_uid(msg)
    assert msg["message_uid"] == first
    stamped = {"role": "assistant", "content": "x", "message_uid": "engine-stamped"}
    assert ensure_uid(stamped)["message_uid"] == "engine-stamped"
    # a copy keeps its identity
    assert ensure_uid(copy.deepcopy(msg))["message_uid"] == first


@pytest.mark.parametrize("bad", [None, "hi", ["role", "user"], {"content": "no role"},
                                 {"role": ""}, {"role": 3}])
def test_ensure_uid_rejects_what_is_not_a_message(bad):
    with pytest.raises((TypeError, ValueError)) as info:
        ensure_uid(bad)
    assert repr(bad) in str(info.value) or type(bad).__name__ in str(info.value)


def test_tool_call_uids_share_one_uid_per_repeated_provider_id():
    msg = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]}
    uids = ensure_tool_call_uids(msg)
    assert set(uids) == {"call_a", "call_b"}
    assert uids["call_a"] != uids["call_b"] and all(is_uid(u) for u in uids.values())
    again = ensure_tool_call_uids(msg)
    assert again == uids
    # the provider-facing ids are untouched
    assert [c["id"] for c in msg["tool_calls"]] == ["call_a", "call_a", "call_b"]


def test_tool_call_uids_empty_without_tool_calls():
    msg = {"role": "assistant", "content": "plain"}
    assert ensure_tool_call_uids(msg) == {}
    assert "_tool_call_uids" not in msg


def test_strip_makes_new_dicts_and_leaves_the_stored_ones_alone():
    stored = [ensure_uid({"role": "user", "content": "a"}),
              {**tool_message("call_1", "out"), "_tool_call_uid": new_uid()}]
    before = copy.deepcopy(stored)
    sent = strip_persistence_fields(stored)
    assert sent == [{"role": "user", "content": "a"},
                    {"role": "tool", "tool_call_id": "call_1", "content": "out"}]
    assert stored == before
    assert all(s is not o for s, o in zip(sent, stored, strict=True))


def test_strip_names_a_non_dict_message():
    with pytest.raises(TypeError, match="message 1"):
        strip_persistence_fields([{"role": "user", "content": "ok"}, "not a message"])


_keys = st.one_of(st.sampled_from(sorted(PERSISTENCE_ONLY_FIELDS)),
                  st.text(min_size=1, max_size=12))
_messages = st.lists(
    st.dictionaries(_keys, st.one_of(st.text(max_size=8), st.integers()), max_size=6)
    .map(lambda d: {"role": "user", **d}),
    max_size=6,
)


@given(_messages)
def test_strip_removes_exactly_the_persistence_fields(messages):
    before = copy.deepcopy(messages)
    sent = strip_persistence_fields(messages)
    assert messages == before  # never mutates
    assert len(sent) == len(messages)
    for out, original in zip(sent, messages, strict=True):
        assert not (set(out) & PERSISTENCE_ONLY_FIELDS)
        assert out == {k: v for k, v in original.items() if k not in PERSISTENCE_ONLY_FIELDS}
    assert strip_persistence_fields(sent) == sent  # idempotent


def test_message_text_reads_strings_and_text_parts():
    assert message_text({"role": "user", "content": "x"}) == "x"
    assert message_text({"role": "assistant", "content": None}) == ""
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}},
             {"type": "text", "text": "b"}]
    assert message_text({"role": "user", "content": parts}) == "a\nb"

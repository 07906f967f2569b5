"""The compressor's summary text (``engines/_compressor.py``) and message sizes: properties.

What the summarizer is asked, how its answer is bounded, and the message that takes
the folded messages' place, all pure; ``message_tokens``
is the size a plan measures.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import count_tokens
from lionctx._messages import new_uid
from lionctx.engines import SUMMARY_MARKER, _compressor, message_tokens
from lionctx.engines._checks import ABSORBED_UIDS_FIELD, UID_FIELD, role_of
from lionctx.engines._compressor import (
    MEDIA_PART_TOKENS,
    MESSAGE_OVERHEAD,
    cut_to_tokens,
    response_text,
    shorten,
    summarizer_request,
    summary_body,
    summary_message,
    summary_role,
)

texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=300)


# -- shortening and cutting --------------------------------------------------------------

@given(texts, st.integers(200, 400))
def test_a_shortened_text_keeps_both_ends_and_says_what_it_left_out(text: str,
                                                                    limit: int) -> None:
    out = shorten(text, limit)
    if len(text) <= limit:
        assert out == text
        return
    keep = limit // 2
    note = f"\n[... {len(text) - 2 * keep} characters omitted ...]\n"
    assert out == text[:keep] + note + text[-keep:]


@given(texts, st.integers(1, 80))  # the summary target is 64 tokens at least
def test_a_cut_text_is_a_prefix_within_the_limit(text: str, limit: int) -> None:
    out = cut_to_tokens(text, limit, len)  # one token a character: exact arithmetic
    if len(text) <= limit:
        assert out == text
    else:
        assert out.endswith("…") and len(out) <= limit
        assert text.startswith(out[:-1])


@settings(deadline=None)  # the first example loads the encoding
@given(st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=400),
       st.integers(2, 60))
def test_a_cut_text_fits_the_real_counter(text: str, limit: int) -> None:
    out = cut_to_tokens(text, limit, count_tokens)
    assert count_tokens(out) <= limit + 1  # the ellipsis can join the last token
    assert text.startswith(out.removesuffix("…").rstrip()) or out == text


# -- what the summarizer is asked ----------------------------------------------------------

call_ids = st.from_regex(r"call_[a-z0-9]{1,6}", fullmatch=True)
messages = st.one_of(
    st.builds(lambda r, t: {"role": r, "content": t},
              st.sampled_from(["user", "assistant", "system", "tool"]), texts),
    st.builds(lambda i, n, a: {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}]},
        call_ids, st.from_regex(r"[a-z_]{1,10}", fullmatch=True),
        st.one_of(texts, st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))),
)


@given(st.lists(messages, min_size=1, max_size=6), st.one_of(st.none(), texts),
       st.one_of(st.none(), st.text(min_size=1, max_size=20)), st.integers(64, 900))
def test_the_request_names_every_folded_call_and_keeps_instructions_apart(
        folded: list[dict[str, Any]], previous: str | None, focus: str | None,
        target: int) -> None:
    request = summarizer_request(folded, previous, focus, target, 4000)
    assert [m["role"] for m in request] == ["system", "user"]
    assert request[0]["content"] == _compressor.SUMMARIZER_INSTRUCTIONS
    asked = request[1]["content"]
    for message in folded:
        for call in message.get("tool_calls") or ():
            assert f"-> calls {call['function']['name']} ({call['id']})" in asked
    assert asked.count("[") >= len(folded)  # one label each
    assert (f"Previous summary:\n{previous}" in asked) == bool(previous)
    assert (f"Give priority to everything about: {focus}" in asked) == bool(focus)
    assert asked.endswith(f"Write at most about {target} tokens.")


def test_a_long_message_is_shortened_for_the_summarizer() -> None:
    text = "a" * 5000 + "z" * 5000
    rendered = _compressor.render_for_summary({"role": "tool", "content": text,
                                            "tool_call_id": "c1", "name": "f"}, 300)
    assert rendered.startswith("[tool (f) result of c1]\n" + "a" * 150)
    assert rendered.endswith("z" * 150) and len(rendered) < 400


@pytest.mark.parametrize("response,text", [
    ("plain", "plain"),
    ({"content": "from a dict"}, "from a dict"),
    (type("R", (), {"content": "from an object"})(), "from an object"),
    ({"content": 3}, None),
    (None, None),
])
def test_the_text_of_an_answer(response: Any, text: str | None) -> None:
    assert response_text(response) == text


# -- the summary message -------------------------------------------------------------------

roles = st.sampled_from(["user", "assistant", "system", "developer", "tool", " User", None])
neighbours = st.one_of(st.none(), st.builds(lambda r: {"role": r, "content": "x"}, roles))


@given(neighbours, neighbours)
def test_a_summary_is_never_system_and_follows_a_user_as_the_assistant(
        before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
    role = summary_role(before, after)
    assert role in ("user", "assistant")
    before_role = role_of(before) if before is not None else None
    after_role = role_of(after) if after is not None else None
    if before_role == "user":
        # Alternate with the message before, unless that would repeat the one after.
        assert role == ("user" if after_role == "assistant" else "assistant")
    else:
        assert role == "user"


uids = st.builds(lambda _: new_uid(), st.integers())
earlier = st.builds(
    lambda uid, absorbed, body: {"role": "user", "content": f"{SUMMARY_MARKER}\n{body}",
                                 **({UID_FIELD: uid} if uid else {}),
                                 **({ABSORBED_UIDS_FIELD: absorbed} if absorbed else {})},
    st.one_of(st.none(), uids), st.lists(uids, max_size=2), texts)


@given(texts, st.lists(earlier, max_size=4))
def test_the_summary_rewrites_the_first_earlier_row_and_absorbs_the_rest(
        body: str, previous: list[dict[str, Any]]) -> None:
    minted = itertools.count()

    def mint() -> str:
        next(minted)
        return new_uid()

    message = summary_message(body, previous, None, None, mint)
    assert message["content"] == f"{SUMMARY_MARKER}\n{body}"
    assert summary_body(message) == body.strip()
    carriers = [m for m in previous if UID_FIELD in m]
    if not carriers:
        assert next(minted) == 1  # a first summary: one fresh uid
        assert ABSORBED_UIDS_FIELD not in message
        return
    assert next(minted) == 0 and message[UID_FIELD] == carriers[0][UID_FIELD]
    absorbed = message.get(ABSORBED_UIDS_FIELD, [])
    expected = {u for m in carriers for u in (m[UID_FIELD], *m.get(ABSORBED_UIDS_FIELD, ()))}
    assert set(absorbed) == expected - {message[UID_FIELD]}
    assert len(absorbed) == len(set(absorbed))  # nothing recorded twice


# -- message sizes ------------------------------------------------------------------------

parts = st.lists(st.one_of(texts, st.builds(lambda t: {"type": "text", "text": t}, texts),
                           st.just({"type": "image_url", "image_url": {"url": "x"}})),
                 max_size=4)


@given(parts, st.one_of(st.none(), st.text(max_size=10)))
def test_a_message_costs_its_parts_plus_the_framing(content: list[Any],
                                                    name: str | None) -> None:
    message: dict[str, Any] = {"role": "user", "content": content}
    if name is not None:
        message["name"] = name
    expected = MESSAGE_OVERHEAD + (count_tokens(name) if name is not None else 0)
    for part in content:
        if isinstance(part, str):
            expected += count_tokens(part)
        elif "text" in part:
            expected += count_tokens(part["text"])
        else:
            expected += MEDIA_PART_TOKENS
    assert message_tokens(message) == expected
    stored = {**message, UID_FIELD: new_uid(), ABSORBED_UIDS_FIELD: [new_uid()]}
    assert message_tokens(stored) == expected  # persistence-only fields cost nothing

from hypothesis import given
from hypothesis import strategies as st
from lionctx._messages import is_uid, new_uid
from lionctx.engines._checks import ABSORBED_UIDS_FIELD, UID_FIELD, message_uid, record_merge


def test_missing_or_malformed_uid_means_not_stored_yet():
    assert message_uid({"role": "user", "content": "x"}) is None
    assert message_uid({"role": "user", "message_uid": "abc"}) is None
    uid = new_uid()
    assert is_uid(uid) and len(uid) == 32
    assert message_uid({"role": "user", "message_uid": uid}) == uid


def test_merge_keeps_the_first_uid_and_records_the_rest_in_text_order():
    a, b, c = ({"role": "user", "content": t, UID_FIELD: new_uid()} for t in "abc")
    survivor = dict(a, content="a\n\nb\n\nc")
    record_merge(survivor, [b, c])
    assert survivor[UID_FIELD] == a[UID_FIELD]
    assert survivor[ABSORBED_UIDS_FIELD] == [b[UID_FIELD], c[UID_FIELD]]


def test_merge_carries_earlier_absorptions_and_skips_parts_without_uid():
    a, b, c = ({"role": "user", "content": t, UID_FIELD: new_uid()} for t in "abc")
    record_merge(b, [c])
    fresh = {"role": "user", "content": "new"}
    record_merge(a, [b, fresh])
    assert a[ABSORBED_UIDS_FIELD] == [b[UID_FIELD], c[UID_FIELD]]


def test_merge_without_uids_records_nothing():
    survivor = {"role": "user", "content": "a"}
    record_merge(survivor, [{"role": "user", "content": "b"}])
    assert ABSORBED_UIDS_FIELD not in survivor


@given(st.lists(st.booleans(), min_size=1, max_size=8))
def test_merge_records_each_uid_once_and_never_its_own(has_uid):
    parts = [
        {"role": "user", "content": str(i), **({UID_FIELD: new_uid()} if h else {})}
        for i, h in enumerate(has_uid)
    ]
    survivor = {"role": "user", "content": "0", UID_FIELD: new_uid()}
    record_merge(survivor, parts)
    record_merge(survivor, parts)  # idempotent
    recorded = survivor.get(ABSORBED_UIDS_FIELD, [])
    assert recorded == [p[UID_FIELD] for p in parts if UID_FIELD in p]
    assert survivor[UID_FIELD] not in recorded

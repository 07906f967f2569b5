"""Admission: LionAGI's rules as examples, its invariants as Hypothesis properties."""

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lionctx._admission import Candidate, admit

caps = st.one_of(st.none(), st.just(0), st.integers(-5, 60))
entries = st.lists(
    st.builds(
        Candidate,
        tokens=st.integers(0, 50),
        priority=st.integers(-3, 3),
        cap=caps,
    ),
    max_size=12,
)
budgets = st.integers(-10, 150)


# --- examples for the edge cases the ADR names -----------------------------------

def test_falsy_cap_means_no_cap():
    d = admit([Candidate(100, cap=None), Candidate(100, cap=0)], 1000)
    assert d.kept == (0, 1)


def test_cap_is_strict_greater_than():
    d = admit([Candidate(10, cap=10), Candidate(11, cap=10)], 1000)
    assert d.kept == (0,)
    assert d.skipped_cap == (1,)


def test_negative_cap_skips_everything_even_zero_tokens():
    d = admit([Candidate(0, cap=-1), Candidate(5, cap=-1)], 1000)
    assert d.kept == ()
    assert d.skipped_cap == (0, 1)


def test_priority_decides_budget_conflicts():
    d = admit([Candidate(60, priority=0), Candidate(60, priority=5)], 100)
    assert d.kept == (1,)
    assert d.skipped_budget == (0,)


def test_ties_keep_registration_order():
    d = admit([Candidate(60), Candidate(60), Candidate(60)], 130)
    assert d.kept == (0, 1)
    assert d.skipped_budget == (2,)


def test_later_smaller_block_still_fits():
    d = admit([Candidate(90, priority=2), Candidate(50, priority=1), Candidate(10)], 100)
    assert d.kept == (0, 2)
    assert d.skipped_budget == (1,)
    assert d.room == (10,)


def test_zero_and_negative_budget():
    assert admit([Candidate(1), Candidate(0)], 0).kept == (1,)
    assert admit([Candidate(0), Candidate(3)], -1).kept == ()
    assert admit([Candidate(0)], -1).skipped_budget == (0,)


def test_output_in_registration_order_not_priority_order():
    d = admit([Candidate(1, priority=0), Candidate(1, priority=9), Candidate(1, priority=4)], 10)
    assert d.kept == (0, 1, 2)


def test_cap_skips_come_before_budget_skips():
    d = admit(
        [Candidate(50, priority=9), Candidate(20, cap=5), Candidate(60, priority=1),
         Candidate(30, cap=10)],
        55,
    )
    assert d.skipped == (1, 3, 2)


def test_no_budget_keeps_everything_within_caps():
    d = admit([Candidate(10**6), Candidate(5, cap=2)], None)
    assert d.kept == (0,)
    assert d.skipped_cap == (1,)
    assert d.used == 10**6


# --- properties ---------------------------------------------------------------------

@settings(max_examples=400)
@given(entries, budgets)
def test_kept_total_never_exceeds_a_non_negative_budget(cands, budget):
    assume(budget >= 0)
    d = admit(cands, budget)
    assert sum(cands[i].tokens for i in d.kept) == d.used <= budget


@settings(max_examples=400)
@given(entries, budgets)
def test_no_kept_block_exceeds_a_truthy_cap(cands, budget):
    d = admit(cands, budget)
    for i in d.kept:
        c = cands[i]
        assert not (c.cap and c.tokens > c.cap)


@settings(max_examples=400)
@given(entries, budgets)
def test_kept_in_registration_order(cands, budget):
    d = admit(cands, budget)
    assert list(d.kept) == sorted(d.kept)
    assert list(d.skipped_cap) == sorted(d.skipped_cap)


@settings(max_examples=400)
@given(entries, budgets)
def test_every_budget_skip_did_not_fit_when_considered(cands, budget):
    d = admit(cands, budget)
    # Replay the walk: priority order, ties in registration order.
    kept = set(d.kept)
    used = 0
    eligible = [i for i in range(len(cands)) if i not in d.skipped_cap]
    order = sorted(eligible, key=lambda i: (-cands[i].priority, i))
    skipped_seen = []
    for i in order:
        if i in kept:
            used += cands[i].tokens
        else:
            assert used + cands[i].tokens > budget
            skipped_seen.append((i, budget - used))
    assert [i for i, _ in skipped_seen] == list(d.skipped_budget)
    assert [r for _, r in skipped_seen] == list(d.room)


@settings(max_examples=400)
@given(entries, budgets, st.data())
def test_raising_priority_never_evicts(cands, budget, data):
    assume(cands)
    d = admit(cands, budget)
    assume(d.kept)
    i = data.draw(st.sampled_from(d.kept))
    bump = data.draw(st.integers(1, 10))
    raised = list(cands)
    c = cands[i]
    raised[i] = Candidate(c.tokens, c.priority + bump, c.cap)
    assert i in admit(raised, budget).kept


@settings(max_examples=300)
@given(entries, budgets)
def test_deterministic(cands, budget):
    assert admit(cands, budget) == admit(list(cands), budget)


@settings(max_examples=300)
@given(st.lists(st.integers(0, 40), max_size=10), st.integers(0, 100))
def test_equal_priorities_fill_in_registration_order(tokens, budget):
    d = admit([Candidate(t) for t in tokens], budget)
    used = 0
    expect = []
    for i, t in enumerate(tokens):
        if used + t <= budget:
            used += t
            expect.append(i)
    assert list(d.kept) == expect


@settings(max_examples=400)
@given(entries, budgets)
def test_every_entry_in_exactly_one_bucket(cands, budget):
    d = admit(cands, budget)
    buckets = list(d.kept) + list(d.skipped_cap) + list(d.skipped_budget)
    assert sorted(buckets) == list(range(len(cands)))


def _reference(rows, budget):
    """LionAGI's rule written out plainly (D3): caps, then a stable priority sort."""
    capped = [i for i, (t, _, c) in enumerate(rows) if c and t > c]
    eligible = [i for i in range(len(rows)) if i not in capped]
    if budget is None:
        return eligible, capped, [], sum(rows[i][0] for i in eligible)
    used, kept, skipped = 0, [], []
    for i in sorted(eligible, key=lambda i: -rows[i][1]):
        if used + rows[i][0] <= budget:
            used += rows[i][0]
            kept.append(i)
        else:
            skipped.append(i)
    return sorted(kept), capped, skipped, used


@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from([0, 0, 0, 1, -2]),
                          st.one_of(st.none(), st.integers(-5, 60))), max_size=12),
       st.one_of(st.none(), st.integers(-5, 200)))
def test_columns_decide_as_the_plain_rule(rows, budget):
    from lionctx._admission import admit_columns

    got = admit_columns([t for t, _, _ in rows], [p for _, p, _ in rows],
                        [c for _, _, c in rows], budget)
    kept, capped, skipped, used = _reference(rows, budget)
    assert (list(got.kept), list(got.skipped_cap), list(got.skipped_budget), got.used) == (
        kept, capped, skipped, used)
    assert admit([Candidate(t, p, c) for t, p, c in rows], budget) == got


# --- dedupe inside admission ------------------------------------------------------------
def _reference_unique(rows, keys, budget):
    """The dedupe rule written out plainly: the walk in admission order, a text kept
    once, a copy refused by its cap or the budget holding nothing."""
    capped = [i for i, (t, _, c) in enumerate(rows) if c and t > c]
    used, kept, over, dup, holder = 0, [], [], [], {}
    for i in sorted((i for i in range(len(rows)) if i not in capped),
                    key=lambda i: -rows[i][1]):
        if keys[i] in holder:
            dup.append((i, holder[keys[i]]))
        elif budget is None or used + rows[i][0] <= budget:
            used += rows[i][0]
            kept.append(i)
            holder[keys[i]] = i
        else:
            over.append(i)
    return sorted(kept), capped, over, used, dup


@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from([0, 0, 1, -2]),
                          st.one_of(st.none(), st.integers(-5, 60)), st.sampled_from("xyz")),
                max_size=12),
       st.one_of(st.none(), st.integers(-5, 200)))
def test_columns_with_keys_decide_as_the_plain_dedupe_rule(rows, budget):
    from lionctx._admission import admit_columns

    keys = [k for *_, k in rows]
    plain = [(t, p, c) for t, p, c, _ in rows]
    got = admit_columns([r[0] for r in plain], [r[1] for r in plain], [r[2] for r in plain],
                        budget, keys)
    kept, capped, over, used, dup = _reference_unique(plain, keys, budget)
    assert (list(got.kept), list(got.skipped_cap), list(got.skipped_budget), got.used,
            list(got.duplicates)) == (kept, capped, over, used, dup)


def test_a_duplicate_yields_to_the_higher_priority_copy():
    d = admit_columns_keyed([5, 5], [0, 3], [None, None], None, ["t", "t"])
    assert d.kept == (1,) and d.duplicates == ((0, 1),)


def test_a_copy_over_its_cap_leaves_the_text_to_the_next_copy():
    d = admit_columns_keyed([5, 5], [0, 0], [4, None], 100, ["t", "t"])
    assert d.kept == (1,) and d.skipped_cap == (0,) and d.duplicates == ()


def test_a_copy_over_the_budget_leaves_the_text_to_a_cheaper_copy():
    d = admit_columns_keyed([8, 5], [0, 0], [None, None], 6, ["t", "t"])
    assert d.kept == (1,) and d.skipped_budget == (0,) and d.room == (6,)


def admit_columns_keyed(tokens, priorities, caps, budget, keys):
    from lionctx._admission import admit_columns

    return admit_columns(tokens, priorities, caps, budget, keys)

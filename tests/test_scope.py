"""A provider's identity and the run-context fields it reads decide whose state is whose."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import InvalidType, RunContext, bind_run_context
from lionctx._scope import context_fields, scope_of, source_identity


class Reads:
    source_identity = "db:users|select"
    context_fields = ("user_id", "tenant_id")


class Plain:
    pass


def test_undeclared_provider_has_no_identity_and_no_fields() -> None:
    assert source_identity(Plain()) is None
    assert context_fields(Plain()) == ()
    assert scope_of(Plain(), RunContext(user_id="u1")) == ()


def test_bad_declarations_are_refused_with_the_value() -> None:
    bad = Plain()
    bad.source_identity = 5  # type: ignore[attr-defined]
    with pytest.raises(InvalidType, match="int"):
        source_identity(bad)
    worse = Plain()
    worse.context_fields = "user_id"  # type: ignore[attr-defined]
    with pytest.raises(InvalidType, match="user_id"):
        context_fields(worse)


def test_bound_context_fills_unset_fields() -> None:
    with bind_run_context(user_id="u9"):
        assert scope_of(Reads(), {"tenant_id": "acme"}) == (("user_id", "'u9'"),
                                                            ("tenant_id", "'acme'"))


@given(st.text(), st.text(), st.text(), st.text())
def test_scopes_differ_when_a_read_field_differs(u1: str, t1: str, u2: str, t2: str) -> None:
    a = scope_of(Reads(), RunContext(user_id=u1, tenant_id=t1))
    b = scope_of(Reads(), RunContext(user_id=u2, tenant_id=t2))
    assert (a == b) == ((u1, t1) == (u2, t2))

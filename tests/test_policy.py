"""The one place the shared knobs are checked: every entry point refuses the same
bad values with the same errors, naming the value."""

import math

import pytest
from agentium_compat import Agent
from hypothesis import given
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, InvalidType, InvalidValue, resolve_context
from lionctx._policy import Policy

BAD = [
    ("timeout", 0, InvalidValue), ("timeout", -1, InvalidValue),
    ("timeout", math.inf, InvalidValue), ("timeout", "1", InvalidType),
    ("timeout", True, InvalidType),
    ("deadline", 0, InvalidValue), ("deadline", "x", InvalidType),
    ("limit", 0, InvalidValue), ("limit", 1.5, InvalidType), ("limit", True, InvalidType),
    ("counter", 3, InvalidType),
    ("on_outcome", "print", InvalidType),
    ("max_chars", 0, InvalidValue), ("max_chars", 2.0, InvalidType),
]


@pytest.mark.parametrize("knob, value, error", BAD)
def test_policy_refuses_each_bad_value_naming_it(knob, value, error):
    field = "observer" if knob == "on_outcome" else knob
    with pytest.raises(error, match=knob if knob != "on_outcome" else "on_outcome"):
        Policy(**{field: value})


@pytest.mark.parametrize("knob, value, error", BAD)
def test_registry_refuses_the_same_values(knob, value, error):
    with pytest.raises(error):
        ContextProviderRegistry(**{knob: value})
    reg = ContextProviderRegistry()
    if knob != "counter":  # the counter is fixed at construction
        with pytest.raises(error):
            setattr(reg, knob, value)
        assert getattr(reg, knob) is None  # a refused value changes nothing


@pytest.mark.anyio
@pytest.mark.parametrize("knob, value, error", BAD)
async def test_resolve_refuses_the_same_values(knob, value, error):
    with pytest.raises(error):
        await resolve_context([], "q", **{knob: value})


@pytest.mark.parametrize("knob, value, error",
                         [b for b in BAD if b[0] in ("timeout", "deadline", "max_chars")])
def test_agent_refuses_the_same_values(knob, value, error):
    with pytest.raises(error, match=f"context_{knob}"):
        Agent(name="a", model=object.__new__(_Model), **{f"context_{knob}": value})


class _Model:
    async def complete(self, *a, **k):  # pragma: no cover - never called
        raise AssertionError


@given(st.floats(min_value=1e-6, max_value=1e6), st.integers(1, 1000))
def test_good_values_are_kept_and_replace_checks_again(seconds, limit):
    p = Policy(timeout=seconds, limit=limit)
    assert p.timeout == seconds and p.limit == limit
    assert p.replace(deadline=seconds).deadline == seconds
    with pytest.raises(InvalidValue):
        p.replace(limit=0)
    assert p.limit == limit  # frozen: the original is unchanged

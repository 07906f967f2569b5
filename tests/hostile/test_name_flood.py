"""A flood of provider names: what a pass remembers about each tag name (its head and
the tokens of its frame) stays bounded in characters, not only in count, however long
the names a hostile caller registers; and every block is still framed with its own name."""

from __future__ import annotations

import uuid

import pytest
from lionctx import _run, resolve_context

pytestmark = pytest.mark.anyio

#: The characters of remembered names and heads a process may hold (four million).
HELD_BOUND = 1 << 22


class Named:
    def __init__(self, name: str, text: str = "ok") -> None:
        self.name = name
        self.text = text

    async def fetch(self, query, ctx):
        return self.text


def held() -> int:
    return sum(len(name) + len(head) for name, (head, _) in list(_run._FRAMES.items()))


async def test_a_flood_of_long_names_holds_a_bounded_number_of_characters():
    long = 100_000
    for i in range(64):  # 6.4 million characters of names, plus their heads
        name = f"{i}-" + "n" * long
        res = await resolve_context([Named(name)], "q")
        assert res.text.startswith(f'<context name="{name}">'), "framed with its own name"
        assert held() <= HELD_BOUND


async def test_a_flood_of_names_each_short_enough_to_keep_is_bounded_in_total():
    # each under any per-name limit, but many: the total is what is bounded
    for batch in range(10):
        names = [f"{batch}-{i}-" + "m" * 240 for i in range(1000)]
        res = await resolve_context([Named(n) for n in names], "q")
        assert res.fired == names
        assert held() <= HELD_BOUND


async def test_short_names_are_remembered_once_each():
    _run._FRAMES.clear()  # a flood before this test may have filled it to its bound
    _run._FRAMES_HELD[0] = 0
    names = [f"source-{i}" for i in range(50)]
    # a text no earlier test counted: a counted block never reaches the frame memo
    fresh = f"ok {uuid.uuid4()}"
    await resolve_context([Named(n, fresh) for n in names], "q")
    first = {n: _run._FRAMES.get(n) for n in names}
    assert all(first.values()), "a short name's frame is counted once and kept"
    await resolve_context([Named(n, fresh) for n in names], "q")
    assert all(_run._FRAMES.get(n) is first[n] for n in names)

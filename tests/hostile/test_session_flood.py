"""A flood of huge session, user and tenant ids: the previous-turn baselines a registry
keeps (one per session) are keyed by ids; a ten-megabyte id must not be held as the
key itself, or a bounded count of sessions holds unbounded memory."""

from __future__ import annotations

import pytest
from lionctx import Branch, RunContext
from lionctx._scope import MAX_SCOPE_CHARS, scope_text
from lionctx.branch import Instruction

pytestmark = pytest.mark.anyio


class Notes:
    name = "notes"

    async def provide(self, branch, instruction):
        return "notes"


def _key_chars(registry) -> int:
    return sum(len(str(part)) for key in list(registry._baselines._turns._where) for part in key)


async def test_sessions_with_huge_ids_hold_bounded_keys():
    for i in range(20):
        branch = Branch(run_context=RunContext(session_id=f"{i}" + "s" * 1_000_000,
                                               user_id="u" * 1_000_000))
        branch.providers.register(Notes())
        report = await branch.providers.gather(branch, Instruction("q"))
        assert report.outcomes[0].text is not None
        assert _key_chars(branch.providers) <= 8 * MAX_SCOPE_CHARS


async def test_sessions_with_huge_ids_stay_apart():
    branch = Branch(run_context=RunContext(session_id="s" * 1_000_000))
    branch.providers.register(Notes())
    first = await branch.providers.gather(branch, Instruction("q"))
    branch.run_context = RunContext(session_id="s" * 1_000_000 + "2")
    other = await branch.providers.gather(branch, Instruction("q"))
    assert first.prefix_stable is None and other.prefix_stable is None, "no baseline shared"
    branch.run_context = RunContext(session_id="s" * 1_000_000)
    again = await branch.providers.gather(branch, Instruction("q"))
    assert again.prefix_stable is True, "the same session compares with its own turn"


async def test_a_huge_int_id_is_held_bounded_and_apart():
    branch = Branch(run_context=RunContext(session_id=10**3000))
    branch.providers.register(Notes())
    first = await branch.providers.gather(branch, Instruction("q"))
    assert _key_chars(branch.providers) <= 8 * MAX_SCOPE_CHARS
    branch.run_context = RunContext(session_id=10**3000 + 1)
    other = await branch.providers.gather(branch, Instruction("q"))
    assert first.prefix_stable is None and other.prefix_stable is None, "no baseline shared"


async def test_a_plain_id_spelled_as_a_long_ids_scope_text_is_another_session():
    # a caller who learns how a long id is held cannot name that session with a short one
    long_id = "s" * 100_000
    branch = Branch(run_context=RunContext(session_id=long_id))
    branch.providers.register(Notes())
    await branch.providers.gather(branch, Instruction("q"))
    branch.run_context = RunContext(session_id=scope_text(long_id))
    spelled = await branch.providers.gather(branch, Instruction("q"))
    assert spelled.prefix_stable is None, "the long id's baseline is not the short id's"

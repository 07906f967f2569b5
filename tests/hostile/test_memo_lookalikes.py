"""Process-wide memos of counts and digests, keyed by a text's name, length and hash
(never the text): a second tenant's text made to look like the first's to them.

Tenant A's block is counted and digested once, and the next text with A's key is given
A's count and digest. Tenant B's provider of the same name returns a ``str`` subclass of
A's length whose ``__hash__`` says it is A's text: it must be counted and digested as
what it is (else B's longer text would pass the budget on A's small count, and B would be
shown A's digest).
"""

from __future__ import annotations

import pytest
from lionctx import RunContext, Status, resolve_context

pytestmark = pytest.mark.anyio

MINE = "a" * 40  # a few tokens
THEIRS = "a b " * 10  # as long, many more tokens


class LooksLikeMine(str):
    def __hash__(self) -> int:
        return hash(MINE)


class Notes:
    name = "notes"

    def __init__(self, text: str) -> None:
        self.text = text

    async def fetch(self, query: str, ctx: object) -> str:
        return self.text


async def test_a_text_claiming_anothers_hash_gets_its_own_count_and_digest() -> None:
    acme, globex = RunContext(tenant_id="acme"), RunContext(tenant_id="globex")
    mine = await resolve_context([Notes(MINE)], "q", acme, breaker=False)
    own = await resolve_context([Notes(THEIRS)], "q", globex, breaker=False)
    assert own.outcomes[0].tokens > mine.outcomes[0].tokens and own.digests != mine.digests
    # previous= makes the digests as the rows are counted: the memo's path for both
    for budget in (None, mine.outcomes[0].tokens):
        posing = await resolve_context([Notes(LooksLikeMine(THEIRS))], "q", globex,
                                       breaker=False, budget=budget, previous=mine)
        row = posing.outcomes[0]
        assert row.tokens == own.outcomes[0].tokens
        if budget is None:
            assert row.status is Status.FIRED and posing.digests == own.digests
        else:  # over the budget A's count would have let it in
            assert row.status is Status.SKIPPED_BUDGET and "a b" not in posing.text

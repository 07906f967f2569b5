"""Hostile objects in the history a turn dedupes against: a role whose ``repr``,
``hash`` or ``==`` raises, a message whose reads raise. The history index reads a
message's role and text through ``str``'s own methods; such a message is compared with
nothing, and costs no turn.
"""

from __future__ import annotations

from typing import Any

import pytest
from lionctx import ContextProviderRegistry, Status, resolve_context

pytestmark = pytest.mark.anyio

RULE = "Never share a customer's password."
ran: list[str] = []


class RaisingRole(str):
    def __repr__(self) -> str:
        ran.append("__repr__")
        raise RuntimeError("repr")

    def __hash__(self) -> int:
        ran.append("__hash__")
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        ran.append("__eq__")
        raise RuntimeError("eq")


class NotARole:
    def __repr__(self) -> str:
        ran.append("__repr__")
        raise RuntimeError("repr")


class Rules:
    name = "rules"

    async def provide(self, branch: object, instruction: object) -> str:
        return RULE

    async def fetch(self, query: str, ctx: object) -> str:
        return RULE


class Owner:
    dedupe_history = True
    run_context = None

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages


ROLES = [lambda: RaisingRole("assistant"), NotARole]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


@pytest.mark.parametrize("role", ROLES, ids=["str-subclass", "object"])
@pytest.mark.parametrize("last", [True, False], ids=["last", "earlier"])
async def test_a_hostile_role_costs_no_turn(role: Any, last: bool) -> None:
    hostile = {"role": role(), "content": "hello"}
    said = {"role": "assistant", "content": RULE}
    reg = ContextProviderRegistry()
    reg.register(Rules())
    report = await reg.gather(Owner([said, hostile] if last else [hostile, said]), "q")
    assert [o.status for o in report.report.outcomes] == [Status.SKIPPED], "still deduped"
    assert ran == []


@pytest.mark.parametrize("role", ROLES, ids=["str-subclass", "object"])
async def test_a_hostile_role_costs_no_agentium_turn(role: Any) -> None:
    history = [{"role": "assistant", "content": RULE}, {"role": role(), "content": "hi"}]
    resolution = await resolve_context([Rules()], "q", None, history=history, dedupe=True)
    assert [o.status for o in resolution.report.outcomes] == [Status.SKIPPED]
    assert ran == []

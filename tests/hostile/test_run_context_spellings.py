"""A run context that names its tenant twice: ``tenant_id`` and ``tenantId``.

Both spellings are accepted (agentium passes camelCase), and a service often builds the
run context from the request's own JSON, then sets the field it authenticated:
``ctx = dict(body["context"]); ctx["tenant_id"] = tenant``. A caller who sent both
spellings kept the other one: the last spelling in the mapping won, so the providers
served the tenant the caller named, not the one the service set. One field given two
values is now refused by name, whichever spelling comes last.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from lionctx import InvalidValue, RunContext, bind_run_context, resolve_context
from lionctx.providers import SqliteContextProvider

pytestmark = pytest.mark.anyio


@pytest.fixture
def plans(tmp_path: Path) -> SqliteContextProvider:
    db = tmp_path / "plans.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE plans (tenant TEXT, body TEXT)")
        conn.executemany("INSERT INTO plans VALUES (?, ?)",
                         [("acme", "acme: acquire globex in May"), ("globex", "globex: hiring")])
    conn.close()
    return SqliteContextProvider(db, "SELECT body FROM plans WHERE tenant = :tenant_id")


async def test_a_callers_second_spelling_never_replaces_the_tenant_the_service_set(
        plans: SqliteContextProvider) -> None:
    body = {"tenant_id": "-", "tenantId": "acme", "user_id": "mallory"}  # the caller's JSON
    ctx = dict(body)
    ctx["tenant_id"] = "globex"  # the tenant the service authenticated
    with pytest.raises(InvalidValue, match="tenant_id"):
        await resolve_context([plans], "plans?", ctx)
    with pytest.raises(InvalidValue, match="tenant_id"):
        RunContext.coerce(ctx)
    with pytest.raises(InvalidValue, match="tenant_id"):
        with bind_run_context(ctx):
            pass


@pytest.mark.parametrize("shape", [
    lambda: {"tenantId": "globex", "tenant_id": "acme"},  # the other order
    lambda: SimpleNamespace(tenant_id="globex", tenantId="acme"),  # an object's attributes
    lambda: {"userId": "ann", "user_id": "bob"},  # another field
])
async def test_two_values_for_one_field_are_refused_in_any_order_or_shape(
        plans: SqliteContextProvider, shape: Any) -> None:
    with pytest.raises(InvalidValue):
        await resolve_context([plans], "plans?", shape())


async def test_both_spellings_with_one_value_are_still_one_context(
        plans: SqliteContextProvider) -> None:
    # An object whose camelCase name is an alias of its field, a mapping that repeats it:
    # one value, one tenant.
    class Aliased:
        def __init__(self) -> None:
            self.tenant_id = "globex"

        @property
        def tenantId(self) -> str:  # noqa: N802
            return self.tenant_id

    for ctx in (Aliased(), {"tenant_id": "globex", "tenantId": "globex"}):
        res = await resolve_context([plans], "plans?", ctx)
        assert "globex: hiring" in res.text and "acme" not in res.text


@pytest.mark.parametrize(("one", "other"), [(1, True), (1, "1"), (1, 1.0), (0, False)])
def test_look_alike_values_in_two_spellings_are_two_values(one: Any, other: Any) -> None:
    # Equal by == yet not the same id: 1 == True == 1.0 would let a caller's True stand
    # for tenant 1, so two spellings must carry the same type and value.
    with pytest.raises(InvalidValue, match="tenant_id"):
        RunContext.coerce({"tenant_id": one, "tenantId": other})
    assert RunContext.coerce({"tenant_id": one, "tenantId": one}).tenant_id == one

"""A provider whose own attributes fight back: a name whose methods raise (or would hold
the loop), a ``str`` subclass overriding ``__len__``, ``__bool__``, ``__hash__``,
``__eq__``...; a ``volatile`` property that raises. A name is read through ``str``'s own
methods only and a raising property declares nothing: neither costs the registration or
a turn, and none of the name's methods runs.
"""

from __future__ import annotations

from typing import Any

import pytest
from lionctx import ContextProviderRegistry, Status, resolve_context

pytestmark = pytest.mark.anyio

METHODS = ("__len__", "__bool__", "__hash__", "__eq__", "__ne__", "__str__", "__repr__",
           "__format__", "__iter__", "__getitem__", "__add__", "__contains__", "isascii",
           "encode", "strip", "replace", "translate", "isprintable", "startswith")
called: list[str] = []


class Hostile(str):
    """Every method a caller might use records the call and raises."""


def _raising(method: str) -> Any:
    def raise_(self: Any, *args: Any, **kwargs: Any) -> Any:
        called.append(method)
        raise RuntimeError(f"{method} of a hostile name")
    return raise_


for _method in METHODS:
    setattr(Hostile, _method, _raising(_method))


class Notes:
    def __init__(self, name: str) -> None:
        self.name = name

    async def fetch(self, query: str, ctx: object) -> str:
        return "text"

    async def provide(self, branch: object, instruction: object) -> str:
        return "text"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    called.clear()


async def test_the_lionagi_face_reads_the_name_without_its_methods() -> None:
    reg = ContextProviderRegistry()
    reg.register(Notes(Hostile("notes")))
    report = await reg.gather(None, "q")
    assert [(o.name, o.status) for o in report.report.outcomes] == [("notes", Status.FIRED)]
    assert called == []


async def test_an_explicit_name_is_read_without_its_methods() -> None:
    reg = ContextProviderRegistry()
    reg.register(Notes("other"), name=Hostile("notes"))
    report = await reg.gather(None, "q")
    assert [o.name for o in report.report.outcomes] == ["notes"]
    assert called == []


async def test_the_agentium_face_reads_the_name_without_its_methods() -> None:
    for _turn in range(2):  # the call built, then the call held
        resolution = await resolve_context([Notes(Hostile("notes"))], "q", None)
        assert [(o.name, o.status) for o in resolution.report.outcomes] == [
            ("notes", Status.FIRED)]
        assert '<context name="notes">' in resolution.text
    assert called == []


class RaisingVolatile(Notes):
    @property
    def volatile(self) -> bool:
        called.append("volatile")
        raise RuntimeError("volatile")


async def test_a_raising_volatile_property_declares_nothing_on_either_face() -> None:
    reg = ContextProviderRegistry()
    reg.register(RaisingVolatile("notes"))  # raised RuntimeError out of register
    rows = (await reg.gather(None, "q")).report.outcomes
    resolution = await resolve_context([RaisingVolatile("notes")], "q", None)
    for row in (*rows, *resolution.report.outcomes):
        assert (row.status, row.volatile) == (Status.FIRED, False)

"""What a provider returns, built to hurt whoever reads it: an object whose attribute
reads raise (``__getattribute__``, a ``__class__`` property), a ``str`` subclass whose
every method raises, an empty answer whose reason is megabytes long or raises when
measured. Each costs one row, bounded, and none of its own code runs on the way.
"""

from __future__ import annotations

from typing import Any

import pytest
from lionctx import ContextProviderRegistry, Status, resolve_context
from lionctx._outcome import NoText
from lionctx._safe_text import TEXT_LIMIT

pytestmark = pytest.mark.anyio

ran: list[str] = []


class ReadsRaise:
    """Not a str; every attribute read raises (``__class__`` included)."""

    def __getattribute__(self, name: str) -> Any:
        ran.append(name)
        raise RuntimeError(f"read of {name}")


class ClassRaises:
    @property  # type: ignore[misc]
    def __class__(self) -> Any:  # noqa: PLE0302
        ran.append("__class__")
        raise RuntimeError("__class__")


class HostileStr(str):
    """A str whose every method (attribute reads included) records the call and raises."""

    def __getattribute__(self, name: str) -> Any:
        ran.append(name)
        raise RuntimeError(f"read of {name}")


for _method in ("__len__", "__bool__", "__hash__", "__eq__", "__str__", "__iter__",
                "__getitem__", "__add__", "__contains__", "__format__", "__repr__"):
    def _raise(self: Any, *args: Any, _name: str = _method) -> Any:
        ran.append(_name)
        raise RuntimeError(_name)
    setattr(HostileStr, _method, _raise)


class Returning:
    def __init__(self, name: str, value: Any) -> None:
        self.name, self.value = name, value

    async def provide(self, branch: object, instruction: object) -> Any:
        return self.value

    async def fetch(self, query: str, ctx: object) -> Any:
        return self.value


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


async def rows(value: Any, face: str, timeout: float | None) -> list[Any]:
    """The rows of a pass over a provider returning ``value`` and one returning text."""
    providers = [Returning("bad", value), Returning("ok", "fine")]
    if face == "agentium":
        resolution = await resolve_context(providers, "q", None, timeout=timeout or 5.0)
        return list(resolution.report.outcomes)
    reg = ContextProviderRegistry(timeout=timeout)
    for p in providers:
        reg.register(p)
    return list((await reg.gather(None, "q")).report.outcomes)


FACES = [("lionagi", None), ("lionagi", 5.0), ("agentium", None)]


@pytest.mark.parametrize(("face", "timeout"), FACES)
@pytest.mark.parametrize("kind", [ReadsRaise, ClassRaises], ids=["reads", "class"])
async def test_an_object_whose_reads_raise_is_a_failed_row(kind: type, face: str,
                                                           timeout: float | None) -> None:
    bad, ok = await rows(kind(), face, timeout)
    assert bad.status is Status.FAILED and "expected str or None" in (bad.reason or "")
    assert ok.status is Status.FIRED
    assert ran == []


@pytest.mark.parametrize(("face", "timeout"), FACES)
async def test_a_str_whose_methods_raise_is_its_own_characters(face: str,
                                                               timeout: float | None) -> None:
    bad, ok = await rows(HostileStr("plain words"), face, timeout)
    assert (bad.status, ok.status) == (Status.FIRED, Status.FIRED)
    assert "plain words" in (bad.text or "")
    assert set(ran) <= {"cached", "stale", "plain"}, "only the marks a text may carry"


class HostileReason(str):
    def __len__(self) -> int:
        ran.append("__len__")
        raise RuntimeError("__len__")

    def __bool__(self) -> bool:
        ran.append("__bool__")
        raise RuntimeError("__bool__")


@pytest.mark.parametrize(("face", "timeout"), FACES)
@pytest.mark.parametrize("reason", [lambda: "no row for " * 500_000,
                                    lambda: HostileReason("no rows")],
                         ids=["five-megabytes", "hostile-str"])
async def test_an_empty_answers_reason_is_bounded(reason: Any, face: str,
                                                  timeout: float | None) -> None:
    bad, _ = await rows(NoText(reason()), face, timeout)
    assert bad.status is Status.EMPTY
    assert type(bad.reason) is str and 0 < len(bad.reason) <= TEXT_LIMIT
    assert bad.reason.startswith("no row")
    assert ran == []

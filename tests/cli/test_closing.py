"""Closing what a command opened: every item closed, each failure contained and logged."""

from __future__ import annotations

import logging

import anyio
import pytest
from lionctx.cli._resolve import Plan, aclose_all, open_providers
from lionctx.providers import FilesystemContextProvider


class Recording(FilesystemContextProvider):
    """A real filesystem provider that records its close, and can fail it."""

    def __init__(self, base, name: str, log: list[str], fail: bool = False) -> None:
        super().__init__(base, name=name)
        self.log = log
        self.fail = fail

    async def aclose(self) -> None:
        await anyio.lowlevel.checkpoint()  # where a cancelled scope would strike
        self.log.append(self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} cannot close")


class Hangs(FilesystemContextProvider):
    async def aclose(self) -> None:
        await anyio.sleep_forever()


class SyncClose:
    name = "sync"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def aclose(self) -> None:  # a plain function is closed too
        self.log.append(self.name)


@pytest.mark.anyio
async def test_a_failing_close_is_logged_and_the_rest_are_still_closed(tmp_path, caplog):
    log: list[str] = []
    items = [Recording(tmp_path, "a", log, fail=True), object(), SyncClose(log),
             Recording(tmp_path, "b", log), Recording(tmp_path, "c", log, fail=True)]
    with caplog.at_level(logging.WARNING, logger="lionctx.cli.resolve"):
        failed = await aclose_all(items)
    assert log == ["a", "sync", "b", "c"]
    assert failed == ["Recording 'a'", "Recording 'c'"]
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["closing Recording 'a' failed: RuntimeError",
                        "closing Recording 'c' failed: RuntimeError"]


@pytest.mark.anyio
async def test_closing_runs_even_in_a_cancelled_scope(tmp_path):
    log: list[str] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await aclose_all([Recording(tmp_path, "a", log), Recording(tmp_path, "b", log)])
    assert log == ["a", "b"]


@pytest.mark.anyio
async def test_a_close_that_hangs_is_abandoned_and_the_next_closed(tmp_path, caplog):
    log: list[str] = []
    with caplog.at_level(logging.WARNING, logger="lionctx.cli.resolve"):
        failed = await aclose_all([Hangs(tmp_path, name="stuck"),
                                   Recording(tmp_path, "b", log)], timeout=0.05)
    assert failed == ["Hangs 'stuck'"]
    assert log == ["b"]
    assert "did not finish" in caplog.records[0].getMessage()


@pytest.mark.anyio
async def test_an_interrupt_during_a_close_is_not_swallowed(tmp_path):
    class Interrupted(FilesystemContextProvider):
        async def aclose(self) -> None:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await aclose_all([Interrupted(tmp_path, name="x")])


@pytest.mark.anyio
async def test_open_providers_closes_what_was_built_when_a_later_build_fails(tmp_path):
    log: list[str] = []

    def build(name: str):
        if name == "bad":
            raise ValueError("bad source")
        return Recording(tmp_path, name, log, fail=name == "a")

    with pytest.raises(ValueError, match="bad source"):
        async with open_providers(Plan(["a", "b", "bad", "never"]), build):
            pytest.fail("the body must not run")
    assert log == ["a", "b"]  # a's failing close did not stop b's


@pytest.mark.anyio
async def test_open_providers_closes_everything_after_the_body_even_when_it_raises(tmp_path):
    log: list[str] = []
    with pytest.raises(LookupError):
        async with open_providers(Plan(["a", "b"]), lambda n: Recording(tmp_path, n, log)) \
                as items:
            assert [p.name for p in items] == ["a", "b"]
            assert log == []
            raise LookupError
    assert log == ["a", "b"]

"""File names that are not valid UTF-8 must not cost the turn.

On POSIX a file name is bytes; Python hands ``bad-\\xff.md`` over as a str holding
a lone surrogate, which no model request can encode. The filesystem provider
shows such names with U+FFFD and reports itself degraded, naming the file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionctx import (
    Branch,
    ContextProviderRegistry,
    OpenAIChatModel,
    RunContext,
    Status,
    resolve_context,
)
from lionctx.providers import FilesystemContextProvider

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(sys.platform in ("win32", "darwin"),
                                 reason="needs a filesystem that allows any bytes in names")]


def bad_file(folder: Path, raw: bytes = b"bad-\xff.md", text: bytes = b"bad name body") -> None:
    with open(os.path.join(os.fsencode(folder), raw), "wb") as f:
        f.write(text)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "good.md").write_text("good body")
    bad_file(folder)
    os.mkdir(os.fsencode(folder) + b"/sub-\xfe")
    bad_file(folder, b"sub-\xfe/inner.md", b"inner body")
    return folder


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def test_names_are_shown_with_replacement_and_reported(notes: Path) -> None:
    p = FilesystemContextProvider(notes)
    out = await p.fetch("", None)
    assert out is not None and encodable(out)
    assert out == ("# bad-\ufffd.md\nbad name body\n\n# good.md\ngood body\n\n"
                   "# sub-\ufffd/inner.md\ninner body")
    assert p.last_included == ["bad-\ufffd.md", "good.md", "sub-\ufffd/inner.md"]
    assert p.degradation_reason == ("2 file name(s) not valid UTF-8, shown with U+FFFD: "
                                    "bad-\ufffd.md, sub-\ufffd/inner.md")
    reg = ContextProviderRegistry()
    reg.register(p)
    report = await reg.gather(SimpleNamespace(run_context=RunContext()), "q")
    assert report.degraded == [{"provider_name": "notes", "reason": p.degradation_reason}]
    assert encodable(json.dumps(report.to_dict(include_text=True), ensure_ascii=False))
    # A warm turn (nothing changed) says the same.
    res = await resolve_context([p], "q", None)
    assert res.outcomes[0].status is Status.FIRED
    assert res.outcomes[0].degradation_reason == p.degradation_reason
    assert encodable(res.text)


async def test_a_skipped_file_with_a_bad_name_is_encodable_too(tmp_path: Path) -> None:
    bad_file(tmp_path, b"big-\xff.md", b"x" * 50)
    p = FilesystemContextProvider(tmp_path, max_file_size=10)
    assert await p.fetch("", None) is None
    assert p.last_skipped == [("big-\ufffd.md", "50 bytes, over max_file_size 10")]
    assert encodable(p.degradation_reason or "")
    assert "big-\ufffd.md" in (p.degradation_reason or "")


async def test_the_turn_reaches_the_model(notes: Path, server: object) -> None:
    model = OpenAIChatModel("test-model", base_url=server.base_url,  # type: ignore[attr-defined]
                            api_key="k", max_retries=0)
    branch = Branch("You are helpful.", model)
    branch.providers.register(FilesystemContextProvider(notes))
    response = await branch.chat("what do my notes say?")
    assert response.text
    body = server.last_request  # type: ignore[attr-defined]
    system = body["messages"][0]["content"]
    assert "# bad-\ufffd.md\nbad name body" in system and "good body" in system
    raw = json.dumps(body, ensure_ascii=False).encode("utf-8")  # valid UTF-8 throughout
    assert raw.decode("utf-8")
    report = branch.last_context_report
    assert report is not None and report.degraded[0]["provider_name"] == "notes"
    assert "bad-\ufffd.md" in report.degraded[0]["reason"]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..")))
def test_any_byte_name_gives_encodable_output(tmp_path_factory: pytest.TempPathFactory,
                                              raw: bytes) -> None:
    import anyio

    folder = tmp_path_factory.mktemp("bytes")
    bad_file(folder, raw + b".md", b"body")
    p = FilesystemContextProvider(folder, glob="*")
    out = anyio.run(p.fetch, "", None)
    for text in (out or "", p.degradation_reason or "", *p.last_included,
                 *(rel for rel, _ in p.last_skipped)):
        assert encodable(text)

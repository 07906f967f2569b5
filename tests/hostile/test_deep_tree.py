"""Attack: a folder thousands of levels deep.

The walk kept one open descriptor per directory level: 5,000 levels exhausted the
process's descriptors (limit 1024), and another source in the same turn failed with
"Too many open files". Now it keeps at most a few dozen open whatever the depth, and
opens the closed ones again, by the same rules, when it comes back to them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from lionctx import Status, resolve_context
from lionctx.providers import FilesystemContextProvider

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd"),
]


def make_chain(base: Path, depth: int, *, trailing: bool = False, bottom: str = "bottom") -> None:
    """``d/d/.../d/deep.md``, ``depth`` levels (too long for one path: built with
    descriptors); with ``trailing``, a ``z.md`` beside each ``d`` (read after it)."""
    fd = os.open(base, os.O_RDONLY)
    try:
        for i in range(depth):
            os.mkdir("d", dir_fd=fd)
            if trailing:
                write_at(fd, "z.md", f"level {i}")
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        write_at(fd, "deep.md", bottom)
    finally:
        os.close(fd)


def remove_chain(base: Path) -> None:
    """Remove what :func:`make_chain` built, one level at a time (shutil.rmtree, and
    so pytest's own cleanup, recurses once per level and fails past about 1,000)."""
    top, spare = base / "d", base / "d.next"
    while top.is_dir():
        for entry in os.scandir(top):
            if entry.name == "d" and entry.is_dir(follow_symlinks=False):
                os.rename(entry.path, spare)
            else:
                os.unlink(entry.path)
        top.rmdir()
        if spare.is_dir():
            os.rename(spare, top)


def write_at(dir_fd: int, name: str, text: str) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dir_fd)
    os.write(fd, text.encode())
    os.close(fd)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Counting(FilesystemContextProvider):
    """Records how many descriptors the process holds at every listing and read."""

    peak = 0

    def _list(self, *args, **kwargs):
        Counting.peak = max(Counting.peak, open_fds())
        return super()._list(*args, **kwargs)

    def _read_file(self, *args):
        Counting.peak = max(Counting.peak, open_fds())
        return super()._read_file(*args)


@pytest.fixture
def deep() -> Iterator[Path]:
    # Outside pytest's own temporary folders: its cleanup recurses once per level.
    home = Path(tempfile.mkdtemp(prefix="lionctx-deep-"))
    base = home / "deep"
    base.mkdir()
    try:
        make_chain(base, 5_000)
        yield base
    finally:
        remove_chain(base)
        shutil.rmtree(home)


async def test_a_five_thousand_deep_folder_holds_a_few_descriptors(deep: Path):
    before = open_fds()
    Counting.peak = 0
    p = Counting(deep)
    text = await p.fetch("", None)
    assert text is not None and text.endswith("bottom")
    assert p.last_included == ["d/" * 5_000 + "deep.md"]
    assert Counting.peak - before <= 40  # 5,000 before
    assert open_fds() == before  # and every one of them closed again


def test_another_source_in_the_same_turn_still_gets_descriptors(deep: Path, tmp_path: Path):
    # The same turn under a limit of 256 descriptors: the deep walk and a second
    # source that opens files of its own.
    small = tmp_path / "small"
    small.mkdir()
    for i in range(20):
        (small / f"n{i}.md").write_text(f"note {i}")
    script = textwrap.dedent(f"""
        import resource, anyio, json
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        from lionctx import resolve_context
        from lionctx.providers import FilesystemContextProvider

        async def main():
            res = await resolve_context(
                [FilesystemContextProvider({str(deep)!r}, name="deep"),
                 FilesystemContextProvider({str(small)!r}, name="small")],
                "q", timeout=60)
            print(json.dumps([[o.status.value, o.reason] for o in res.outcomes]))

        anyio.run(main)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads(out.stdout)
    assert rows == [["fired", None], ["fired", None]], out.stderr[-2000:]
    assert "Too many open files" not in out.stderr


# -- the same guarantee, attacked from other sides -------------------------------------------

async def test_every_level_read_after_its_subfolder_comes_back_in_order(tmp_path: Path):
    # A z.md after each d/: the walk must come back to every level, whose descriptor
    # it closed long ago, and read it there; the result is the same as a plain walk.
    base = tmp_path / "trail"
    base.mkdir()
    make_chain(base, 300, trailing=True)
    before = open_fds()
    Counting.peak = 0
    p = Counting(base, max_files=1_000)
    await p.fetch("", None)
    expected = ["d/" * 300 + "deep.md"] + ["d/" * i + "z.md" for i in range(299, -1, -1)]
    assert p.last_included == expected and p.last_skipped == []
    assert Counting.peak - before <= 40


async def test_a_wide_shallow_tree_holds_a_few_descriptors(tmp_path: Path):
    base = tmp_path / "wide"
    base.mkdir()
    for i in range(2_000):
        (base / f"d{i:04}").mkdir()
        (base / f"d{i:04}" / "n.md").write_text(str(i))
    before = open_fds()
    Counting.peak = 0
    p = Counting(base, max_files=2_000)
    await p.fetch("", None)
    assert len(p.last_included) == 2_000
    assert Counting.peak - before <= 5


async def test_a_folder_swapped_for_an_escaping_symlink_while_closed_is_not_reentered(
        tmp_path: Path):
    # The walk is deep inside top/ (top's descriptor closed) when top/ becomes a
    # symlink to a folder outside the base: coming back, it must not follow it.
    base = tmp_path / "base"
    (base / "top").mkdir(parents=True)
    make_chain(base / "top", 60)
    (base / "top" / "z.md").write_text("inside, read after the chain")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "z.md").write_text("SECRET outside the base")

    class Swapping(FilesystemContextProvider):
        def _read_file(self, dir_fd, name, *rest):
            if name == "deep.md":
                (base / "top").rename(tmp_path / "moved")
                os.symlink(outside, base / "top")
            return super()._read_file(dir_fd, name, *rest)

    p = Swapping(base)
    text = await p.fetch("", None)
    assert "SECRET" not in (text or "")
    assert p.last_included == ["top/" + "d/" * 60 + "deep.md"]
    assert p.last_skipped == [("top/", "not walked to its end: changed during the walk")]


async def test_a_folder_replaced_by_another_folder_while_closed_is_not_reentered(
        tmp_path: Path):
    base = tmp_path / "base"
    (base / "top").mkdir(parents=True)
    make_chain(base / "top", 60)
    (base / "top" / "z.md").write_text("the original")

    class Replacing(FilesystemContextProvider):
        def _read_file(self, dir_fd, name, *rest):
            if name == "deep.md":
                (base / "top").rename(base / "old")
                (base / "top").mkdir()
                (base / "top" / "z.md").write_text("a replacement")
            return super()._read_file(dir_fd, name, *rest)

    p = Replacing(base, glob="top/**/*.md")
    text = await p.fetch("", None)
    assert "replacement" not in (text or "")
    assert p.last_skipped == [("top/", "not walked to its end: changed during the walk")]


async def test_a_deep_folder_beside_other_sources_in_a_sequential_turn(deep: Path,
                                                                       tmp_path: Path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text("a")
    res = await resolve_context([FilesystemContextProvider(deep, name="deep"),
                                 FilesystemContextProvider(other, name="other")], "q",
                                timeout=60)
    assert [o.status for o in res.outcomes] == [Status.FIRED, Status.FIRED]

"""The filesystem walk's opens and reads (``providers/_descriptors.py``): properties.

The pure decisions (is a real path under the base, why a file is not read, the text
of a file's bytes) against plain references, and the capped read against real files.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import PurePosixPath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx.providers._descriptors import decode_text, file_problem, inside, read_capped

posix = pytest.mark.skipif(os.sep != "/", reason="POSIX paths")

names = st.sampled_from(["a", "b", "ab", "a.b", "a b", "é", "b-", ".x"])
real_paths = st.lists(names, max_size=4).map(lambda parts: "/" + "/".join(parts))


@posix
@given(real_paths, real_paths)
def test_inside_means_the_base_or_a_path_below_it(path: str, base: str) -> None:
    expected = PurePosixPath(base) in (PurePosixPath(path), *PurePosixPath(path).parents)
    assert inside(path, base) == expected


@posix
def test_a_sibling_that_starts_alike_is_not_inside() -> None:
    assert not inside("/srv/notes-private/x", "/srv/notes")
    assert not inside("/srv/note", "/srv/notes")
    assert inside("/srv/notes", "/srv/notes") and inside("/srv/notes/x", "/srv/notes")
    assert inside("/anything", "/")


@given(st.sampled_from([stat.S_IFREG, stat.S_IFDIR, stat.S_IFIFO, stat.S_IFCHR,
                        stat.S_IFSOCK, stat.S_IFLNK]),
       st.integers(0, 10_000), st.integers(0, 10_000))
def test_only_regular_files_within_the_cap_are_read(kind: int, size: int, cap: int) -> None:
    problem = file_problem(kind | 0o644, size, cap)
    if kind != stat.S_IFREG:
        assert problem == "not a regular file"
    elif size > cap:
        assert problem == f"{size} bytes, over max_file_size {cap}"
    else:
        assert problem is None


@given(st.one_of(st.binary(max_size=64), st.text(max_size=32).map(str.encode)),
       st.sampled_from(["utf-8", "ascii", "latin-1"]))
def test_text_is_the_bytes_decoded_and_never_holds_nul(data: bytes, encoding: str) -> None:
    text, reason = decode_text(data, encoding)
    try:
        decoded: str | None = data.decode(encoding)
    except UnicodeDecodeError:
        decoded = None
    if decoded is None:
        assert (text, reason) == (None, f"not valid {encoding}")
    elif "\x00" in decoded:
        assert (text, reason) == (None, "binary (contains NUL characters)")
    else:
        assert (text, reason) == (decoded, None)
        assert text is not None and text.encode(encoding) == data


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200_000), st.integers(0, 150_000), st.floats(0, 2))
def test_a_capped_read_is_all_of_the_file_or_nothing(size: int, limit: int,
                                                     hint: float) -> None:
    # The size hint may be wrong (the file grew or shrank since it was listed).
    data = os.urandom(size)
    with tempfile.TemporaryFile() as file:
        file.write(data)
        file.flush()
        file.seek(0)
        out = read_capped(file.fileno(), int(size * hint), limit)
    assert out == (data if size <= limit else None)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_an_abandoned_walk_closes_every_directory_it_opened(tmp_path: Any) -> None:
    import threading

    from lionctx.providers import FilesystemContextProvider
    from lionctx.providers._walk import _Abandoned

    for d in ("a", "a/b", "c"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.md").write_text("x")
    provider = FilesystemContextProvider(tmp_path)
    stop = threading.Event()
    stop.set()  # abandoned before the root's listing: it stops at its first entry
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(_Abandoned):
            provider._scan(stop)
    assert len(os.listdir("/proc/self/fd")) == before

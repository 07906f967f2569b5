"""The pure parts of engine loading: plugin module names and "first match wins".

``_loader.module_name`` names the package a plugin directory is imported as;
``_loader.shadowed_by`` is the rule the engine listing reports availability by.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from lionctx.engines import _loader

segments = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="/\x00"),
                   min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))
paths = st.lists(segments, min_size=1, max_size=4).map(lambda parts: Path("/", *parts))


@given(paths)
def test_a_plugin_module_name_is_a_private_identifier(path: Path) -> None:
    name = _loader.module_name(path)
    assert name.isidentifier()
    assert name.startswith("_lionctx_context_engine_")
    assert name == _loader.module_name(Path(str(path)))  # the same path, the same module


@given(paths, paths)
def test_different_plugin_directories_never_share_a_module(a: Path, b: Path) -> None:
    # Two plugins named alike in different places ("x/topic", "y/topic") stay apart.
    assert (_loader.module_name(a) == _loader.module_name(b)) == (a == b)


def test_module_names_of_look_alike_directories() -> None:
    one, two = Path("/a/my-plugin"), Path("/a/my_plugin")
    assert _loader.module_name(one) != _loader.module_name(two)
    assert _loader.module_name(Path("/p/tëst²")).isidentifier()


names = st.sampled_from(["compressor", "topic", "rag", "a", "b"])
found_lists = st.lists(st.tuples(names, st.from_regex(r"src[0-9]{1,3}", fullmatch=True)),
                       max_size=12, unique_by=lambda row: row[1])


@given(found_lists, st.dictionaries(names, st.just("builtin"), max_size=2))
def test_the_first_engine_of_a_name_wins_and_the_rest_name_it(
        found: list[tuple[str, str]], taken: dict[str, str]) -> None:
    before = dict(taken)
    shadows = _loader.shadowed_by(found, taken)
    assert taken == before  # the caller's mapping is not changed
    assert len(shadows) == len(found)
    first: dict[str, str] = dict(taken)
    for name, source in found:
        first.setdefault(name, source)
    for (name, source), shadow in zip(found, shadows, strict=True):
        if shadow is None:
            assert first[name] == source  # the one the name resolves to
        else:
            assert shadow == first[name] != source
    winners = [name for (name, _), shadow in zip(found, shadows, strict=True) if shadow is None]
    assert sorted(winners) == sorted({name for name, _ in found} - set(taken))


def test_shadowing_examples() -> None:
    found = [("topic", "dir1"), ("rag", "dir2"), ("topic", "ep x"), ("compressor", "dir3")]
    assert _loader.shadowed_by(found, {"compressor": "builtin"}) == [
        None, None, "dir1", "builtin"]
    assert _loader.shadowed_by([]) == []

"""The glob matcher (``lionctx.providers._glob``): examples, and properties against a
reference that matches whole paths recursively."""

from __future__ import annotations

import fnmatch
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx.providers._filesystem import GlobMatcher
from lionctx.providers._filesystem import GlobMatcher as ReExported
from lionctx.providers._glob import compiled_glob, expand_braces


def matches(matcher: GlobMatcher, path: str) -> bool:
    """What the walk does: step through each directory, then test the file name."""
    *dirs, name = path.split("/")
    states = matcher.initial
    for d in dirs:
        states = matcher.step(states, d)
        if not states:
            return False  # pruned: the walk would not even list this directory
    return matcher.file_test(states)(name)


def _segment_ok(seg: str, name: str) -> bool:
    if not re.search(r"[*?\[]", seg):
        return name == seg
    if name.startswith(".") and not seg.startswith("."):
        return False  # a wildcard does not match a hidden name
    return fnmatch.fnmatchcase(name, seg)


def reference(pattern: str, path: str) -> bool:
    """Whole-path matching, written the obvious way (no states, no memo, no pruning)."""
    pat = [p for p in pattern.split("/") if p not in ("", ".")]
    segs = path.split("/")

    def go(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(segs)
        if pat[i] == "**" and i == len(pat) - 1:
            # last: it stands for the file too, so it takes at least one segment
            return j < len(segs) and not any(s.startswith(".") for s in segs[j:])
        if pat[i] == "**":
            if go(i + 1, j):  # zero directories
                return True
            return j < len(segs) and not segs[j].startswith(".") and go(i, j + 1)
        return j < len(segs) and _segment_ok(pat[i], segs[j]) and go(i + 1, j + 1)

    return go(0, 0)


names = st.sampled_from(["a", "b", "ab", "a.b", ".a", ".b", "b.a", "x", "[a]", "a-b"])
paths = st.lists(names, min_size=1, max_size=5).map("/".join)
pattern_segments = st.sampled_from(
    ["**", "*", "?", "a", "b", "*.a", "*.b", "a*", "[ab]", "[!a]", ".*", ".a", "a?b",
     "*b*", "[[]a]", "?.?", "x"])
patterns = st.lists(pattern_segments, min_size=1, max_size=5).map("/".join)


# -- examples ------------------------------------------------------------------------

def test_default_glob_matches_markdown_at_any_depth_but_not_in_hidden_directories():
    g = GlobMatcher("**/*.md")
    assert matches(g, "a.md") and matches(g, "d/e/f.md")
    assert not matches(g, ".git/x.md") and not matches(g, ".hidden.md")
    assert not matches(g, "a.txt")


def test_a_dot_segment_matches_hidden_names():
    assert matches(GlobMatcher(".*/*.md"), ".notes/a.md")
    assert matches(GlobMatcher("**/.git/*"), "a/.git/HEAD")


def test_double_star_last_matches_every_visible_file_below():
    g = GlobMatcher("docs/**")
    assert matches(g, "docs/a") and matches(g, "docs/x/y/z.txt")
    assert not matches(g, "docs/.x") and not matches(g, "other/a")


def test_braces_nest_and_bound_the_alternatives():
    assert expand_braces("a{b,c{d,e}}f") == ["abf", "acdf", "acef"]
    assert expand_braces("{nocomma}") == ["{nocomma}"]
    assert expand_braces("{unbalanced,") == ["{unbalanced,"]
    with pytest.raises(ValueError, match="alternatives"):
        GlobMatcher("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")


@pytest.mark.parametrize("bad", ["/etc/*", "\\x\\*", "C:/x/*", "../*.md", "a/../b",
                                 "a\\..\\b", "", "  ", ".", "./"])
def test_absolute_climbing_and_empty_globs_are_refused(bad):
    with pytest.raises(ValueError) as info:
        GlobMatcher(bad)
    assert repr(bad) in str(info.value)


def test_a_literal_bracket_is_written_as_a_class():
    assert matches(GlobMatcher("[[]a]"), "[a]")
    with pytest.raises(ValueError, match=r"no closing '\]'"):
        GlobMatcher("notes/[a.md")


def test_a_glob_that_is_not_a_str_is_a_type_error():
    with pytest.raises(TypeError, match="glob must be a str"):
        GlobMatcher(b"*.md")  # type: ignore[arg-type]


def test_the_provider_module_still_exports_the_matcher():
    assert ReExported is GlobMatcher
    assert compiled_glob("**/*.md") is compiled_glob("**/*.md")


# -- properties ----------------------------------------------------------------------

@settings(max_examples=400)
@given(patterns, paths)
def test_matcher_agrees_with_the_whole_path_reference(pattern, path):
    assert matches(GlobMatcher(pattern), path) == reference(pattern, path)


@given(patterns, patterns, paths)
def test_braces_are_the_union_of_their_alternatives(p1, p2, path):
    both = GlobMatcher("{" + p1 + "," + p2 + "}")
    assert matches(both, path) == (matches(GlobMatcher(p1), path)
                                   or matches(GlobMatcher(p2), path))


@given(patterns, paths, st.integers(1, 3))
def test_repeated_double_star_is_one_double_star(pattern, path, n):
    many = pattern.replace("**", "/".join(["**"] * n))
    assert matches(GlobMatcher(many), path) == matches(GlobMatcher(pattern), path)


@given(patterns, st.lists(st.sampled_from(["a", "b", "x"]), max_size=4), names)
def test_double_star_prefix_matches_at_any_visible_depth(pattern, dirs, name):
    # "**/P" matches d1/.../dn/f for visible directories exactly when P matches some
    # suffix of it (P itself may start with "**").
    path = "/".join([*dirs, name])
    segs = path.split("/")
    suffixes = ["/".join(segs[k:]) for k in range(len(segs))]
    assert matches(GlobMatcher("**/" + pattern), path) == any(
        reference(pattern, s) for s in suffixes)


@given(patterns, st.lists(paths, min_size=1, max_size=20))
def test_memo_tables_never_change_an_answer(pattern, many):
    warm = GlobMatcher(pattern)
    for path in many:
        matches(warm, path)  # fill the step and file-test tables
    for path in many:
        assert matches(warm, path) == matches(GlobMatcher(pattern), path)


@given(st.text(alphabet="ab*?!.", max_size=4), st.text(alphabet="ab*?!.", max_size=4))
def test_an_unclosed_bracket_is_refused_naming_the_pattern(before, after):
    pattern = f"{before}[{after}"  # no ']' anywhere after the '['
    with pytest.raises(ValueError) as info:
        GlobMatcher(pattern)
    assert repr(pattern) in str(info.value)


@given(patterns)
def test_a_pattern_with_a_parent_segment_is_refused(pattern):
    with pytest.raises(ValueError, match="climb out"):
        GlobMatcher(pattern + "/../x")

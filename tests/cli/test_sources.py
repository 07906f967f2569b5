"""Sources of ``lionctx resolve``: flag syntax, naming, config checks, provider errors."""

from __future__ import annotations

import re
import string
import sys

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from lionctx.cli import UsageError, build_parser
from lionctx.cli._sources import SourceSpec, assign_names, build_provider, read_config
from lionctx.providers import FilesystemContextProvider, HttpContextProvider


def check_glob(glob: str, where: str) -> None:
    """Build an ``--fs`` source with ``glob``, written at ``where``."""
    build_provider(SourceSpec("fs", ".", where, glob=glob), None)


def parse(*args: str):
    return build_parser().parse_args(["resolve", *args])


names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,15}", fullmatch=True)
paths = st.builds(lambda head, rest: head + rest, st.sampled_from(["/", "./", "../", "~/"]),
                  st.text(string.ascii_letters + string.digits + "/._-=", max_size=20))


@given(name=names, path=paths)
@example(name="notes", path="./a=b")
def test_name_prefix_splits_once_and_paths_with_a_slash_first_stay_whole(name, path):
    (spec,) = parse("--fs", f"{name}={path}").sources
    assert (spec.name, spec.target) == (name, path)
    (bare,) = parse("--fs", path).sources
    assert (bare.name, bare.target) == (None, path)


@given(name=st.one_of(st.none(), names))
@example(name=None)
def test_a_url_is_never_taken_for_a_name(name):
    url = "http://127.0.0.1:8080/status?a=b&c=d"
    arg = url if name is None else f"{name}={url}"
    (spec,) = parse("--http", arg).sources
    assert spec.target == url and spec.name == name


def test_modifiers_apply_to_the_source_just_before_them():
    args = parse("--fs", "./a", "--glob", "*.txt", "--priority", "2",
                 "--sqlite", "p.db", "--sql", "SELECT 1", "--cap", "50", "--name", "db")
    fs, db = args.sources
    assert (fs.kind, fs.glob, fs.priority, fs.cap, fs.name) == ("fs", "*.txt", 2.0, None, None)
    assert (db.kind, db.sql, db.cap, db.name) == ("sqlite", "SELECT 1", 50, "db")


specs = st.lists(
    st.tuples(st.sampled_from(["fs", "http", "sqlite"]),
              st.sampled_from(["/a/docs", "/b/docs", "/x/profile.db", "/y/profile.db",
                               "http://h/status", "http://h/", "/"]),
              st.one_of(st.none(), st.sampled_from(["docs", "status", "x", "docs-2"]))),
    max_size=8)


@given(specs)
@example([("fs", "/a/docs", None), ("fs", "/b/docs", None), ("fs", "/c", "docs-2")])
def test_assign_names_keeps_explicit_names_and_makes_all_unique(items):
    explicit = [n for _, _, n in items if n is not None]
    built = [SourceSpec(kind, target, f"#{i}", name=name)
             for i, (kind, target, name) in enumerate(items)]
    if len(set(explicit)) != len(explicit):
        with pytest.raises(UsageError, match="two sources are named"):
            assign_names(built)
        return
    assign_names(built)
    final = [s.name for s in built]
    assert len(set(final)) == len(final)
    assert all(n for n in final)
    for spec, (_, _, name) in zip(built, items, strict=True):
        if name is not None:
            assert spec.name == name


def test_default_names_come_from_the_target():
    built = [SourceSpec("fs", "/srv/docs/", "a"), SourceSpec("sqlite", "/d/profile.db", "b"),
             SourceSpec("http", "http://127.0.0.1:9/api/status?x=1", "c"),
             SourceSpec("http", "http://127.0.0.1:9/", "d"), SourceSpec("fs", "/x/docs", "e")]
    assign_names(built)
    assert [s.name for s in built] == ["docs", "profile", "127.0.0.1:9/api/status",
                                       "127.0.0.1:9", "docs-2"]
    # The same function as an unnamed HttpContextProvider; two URLs that differ only
    # in their query string share a base name and are told apart by a suffix.
    same = [SourceSpec("http", "http://a.example/feed?x=1", "f"),
            SourceSpec("http", "http://a.example/feed?x=2", "g"),
            SourceSpec("http", "not a url at all", "h")]
    assign_names(same)
    assert [s.name for s in same] == ["a.example/feed", "a.example/feed-2", "http"]


def test_build_provider_turns_constructor_errors_into_usage_errors(tmp_path):
    bad = SourceSpec("fs", str(tmp_path), "--fs here", name="n", options={"max_files": 0})
    with pytest.raises(UsageError, match=r"^--fs here: max_files must be >= 1, got 0$"):
        build_provider(bad, 1.0)
    bad_type = SourceSpec("fs", str(tmp_path), "--fs here", name="n",
                          options={"encoding": 3})
    with pytest.raises(UsageError, match="encoding must be a str"):
        build_provider(bad_type, 1.0)


def test_build_provider_makes_the_builtin_providers(tmp_path):
    fs = build_provider(SourceSpec("fs", str(tmp_path), "x", name="kb", glob="*.txt"), None)
    assert isinstance(fs, FilesystemContextProvider)
    assert (fs.name, fs.glob, fs.base_path) == ("kb", "*.txt", str(tmp_path))
    http = build_provider(SourceSpec("http", "http://127.0.0.1:9/s", "y", name="s"), 2.0)
    assert isinstance(http, HttpContextProvider)
    # the pass's timeout decides; the client's own stays just behind it
    assert http.timeout == 3.0


def test_read_config_resolves_paths_from_the_file_and_checks_types(tmp_path):
    (tmp_path / "c.toml").write_text(
        'timeout = 2\nconcurrent = true\n[[providers]]\nkind = "fs"\npath = "docs"\n'
        'priority = 1.5\n[[providers]]\nkind = "http"\nurl = "http://127.0.0.1:1/x"\n'
        'headers = {A = "b"}\n')
    settings, (fs, http) = read_config(tmp_path / "c.toml")
    assert settings == {"timeout": 2, "concurrent": True}
    assert fs.target == str(tmp_path / "docs") and fs.priority == 1.5
    assert http.target == "http://127.0.0.1:1/x" and http.options == {"headers": {"A": "b"}}
    (tmp_path / "bad.toml").write_text('[[providers]]\nkind = "fs"\npath = "."\ncap = 2.5\n')
    with pytest.raises(UsageError, match=re.escape("providers[0].cap must be a whole number")):
        read_config(tmp_path / "bad.toml")


def test_missing_toml_support_names_the_fix(tmp_path, monkeypatch):
    (tmp_path / "c.toml").write_text("budget = 1\n")
    # what Python 3.10 without tomli looks like to an import statement
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", None)
    with pytest.raises(UsageError, match=r"Python 3\.11\+ or the 'tomli' package"):
        read_config(tmp_path / "c.toml")


# -- globs the fs provider would take literally ---------------------------------------

def _fnmatch_takes_a_bracket_literally(segment: str) -> bool:
    """The oracle: fnmatch's own translation has an escaped '[' outside any class.

    (For text without backslashes: a class that starts with '[' translates to
    '[\\[', so an escaped '[' right after a '[' is a class member, not a literal.)
    """
    import fnmatch

    return re.search(r"(?<!\[)\\\[", fnmatch.translate(segment)) is not None


@given(st.text(alphabet="[]!-a*?", max_size=12))
@example("[")
@example("[]")
@example("[!]")
@example("[]]")
@example("[[]")
@example("a[!]b]")
def test_check_glob_refuses_exactly_the_brackets_fnmatch_would_take_literally(segment):
    literal = _fnmatch_takes_a_bracket_literally(segment)
    if not segment.strip():
        return  # the provider's own "must not be empty" error
    if literal:
        with pytest.raises(UsageError, match=re.escape(f"glob {segment!r} has a '['")):
            check_glob(segment, "--fs x")
    else:
        check_glob(segment, "--fs x")


def test_check_glob_names_the_glob_and_where_it_was_written():
    with pytest.raises(UsageError, match=re.escape(
            "--fs ./kb: glob '[' has a '[' with no closing ']' "
            "(write '[[]' to match a literal '[')")):
        check_glob("[", "--fs ./kb")
    # per path segment and per brace alternative, as the provider matches them
    for bad in ("docs[/*.md", "{*.md,*.[tx}", "**/a[b"):
        with pytest.raises(UsageError, match="no closing"):
            check_glob(bad, "here")
    for good in ("**/*.md", "[[]x]", "[!.]*", "{a,b}/[ab]?.txt", "{a,b"):
        check_glob(good, "here")
    # the provider's own checks come first, with its own words
    with pytest.raises(UsageError, match=r"^here: glob must not climb out"):
        check_glob("../x[", "here")


def test_build_provider_refuses_an_unclosed_bracket_from_a_flag_or_a_config(tmp_path):
    spec = SourceSpec("fs", str(tmp_path), "--config c.toml: providers[0]", name="kb",
                      glob="*.[md")
    with pytest.raises(UsageError, match=re.escape(
            "--config c.toml: providers[0]: glob '*.[md' has a '['")):
        build_provider(spec, None)

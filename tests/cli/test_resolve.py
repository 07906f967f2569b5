"""``lionctx resolve``, run as a subprocess: each source kind, config, JSON, errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from lionctx._render import tag_block

from .helpers import ANSI, clean_env, run_cli, run_cli_on_pty

SQL = "SELECT name, plan FROM users WHERE id = :user_id"


def rows(stdout: str) -> dict[str, list[str]]:
    """The report table's rows, by provider name (split on runs of spaces)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("provider "))
    out = {}
    for line in lines[start + 1:]:
        if line.startswith("budget:"):
            break
        cells = line.split()
        out[cells[0]] = cells
    return out


def resolve_json(*args: str, **kwargs) -> dict:
    proc = run_cli("resolve", *args, "--format", "json", **kwargs)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return json.loads(proc.stdout)


# -- each source kind -------------------------------------------------------------

def test_fs_source_prints_the_context_then_the_report(notes):
    proc = run_cli("resolve", "--fs", f"kb={notes}", "--query", "refund?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    context, _, report = proc.stdout.partition("-- report (lionagi face) --")
    assert context.startswith('<context name="kb">\n# deep/nested.md\nA nested note.\n')
    assert "# refunds.md\nRefunds take 5 business days." in context
    assert "not a markdown file" not in context  # the default glob is **/*.md
    row = rows(report)["kb"]
    assert row[1:3] == ["fs", "fired"]
    assert int(row[3]) > 0
    assert "budget: " in report and " of 2000 tokens used" in report
    assert ANSI not in proc.stdout  # not a terminal: no colour


def test_fs_glob_and_name_apply_to_the_source_before_them(notes, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("other folder\n")
    doc = resolve_json("--fs", str(notes), "--glob", "*.txt", "--name", "texts",
                       "--fs", str(other))
    assert [o["name"] for o in doc["outcomes"]] == ["texts", "other"]
    assert doc["context"] == (tag_block("texts", "# todo.txt\nnot a markdown file\n")
                              + "\n\n" + tag_block("other", "# x.md\nother folder\n"))


def test_http_source_allows_its_own_host(server):
    doc = resolve_json("--http", f"{server.url}/text?body=all%20systems%20go")
    # unnamed: host:port/path, never the query string
    name = f"{server.url.removeprefix('http://')}/text"
    assert doc["context"] == tag_block(name, "all systems go")
    assert doc["outcomes"][0]["name"] == name
    assert doc["outcomes"][0]["status"] == "fired"
    assert doc["outcomes"][0]["source"] == "http"
    assert server.paths == ["/text?body=all%20systems%20go"]


def test_a_failing_and_a_slow_source_cost_one_row_each_and_exit_0(server, notes):
    # 2.5 s: room for the notes source on a loaded machine; the slow one asks for 30 s
    proc = run_cli("resolve", "--concurrent", "--timeout", "2.5",
                   "--fs", f"notes={notes}",
                   "--http", f"broken={server.url}/status/500",
                   "--http", f"slow={server.url}/slow?s=30")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    table = rows(proc.stdout)
    assert table["notes"][2] == "fired"
    assert table["broken"][2] == "failed"
    assert f"HTTP 500 from {server.url}/status/500" in " ".join(table["broken"])
    assert "SourceUnavailable" not in " ".join(table["broken"])
    assert table["slow"][2] == "timeout"
    assert "timed out after 2.5s" in " ".join(table["slow"])
    assert '<context name="notes">' in proc.stdout
    assert '<context name="broken">' not in proc.stdout


def test_sqlite_source_binds_the_user(profile_db):
    doc = resolve_json("--sqlite", f"profile={profile_db}", "--sql", SQL, "--user", "u2")
    assert doc["context"] == tag_block("profile", "name: Lin\nplan: Enterprise")
    assert doc["user"] == "u2"
    nobody = resolve_json("--sqlite", str(profile_db), "--sql", SQL, "--user", "u9")
    assert nobody["context"] == ""
    assert [(o["name"], o["status"]) for o in nobody["outcomes"]] == [("profile", "empty")]


def test_the_query_reaches_providers(profile_db):
    doc = resolve_json("--sqlite", str(profile_db), "--sql",
                       "SELECT name FROM users WHERE plan = :query", "--query", "Team")
    assert doc["context"] == tag_block("profile", "name: Ada")
    assert doc["query"] == "Team"


# -- priorities, caps, budget, faces ------------------------------------------------

def test_priority_cap_and_budget_decide_what_is_kept(tmp_path):
    for name, words in (("big", 300), ("small", 5), ("capped", 50)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "a.md").write_text(" ".join(["word"] * words))
    doc = resolve_json("--budget", "100",
                       "--fs", f"big={tmp_path / 'big'}", "--priority", "1",
                       "--fs", f"small={tmp_path / 'small'}", "--priority", "5",
                       "--fs", f"capped={tmp_path / 'capped'}", "--cap", "10")
    status = {o["name"]: o["status"] for o in doc["outcomes"]}
    assert status == {"big": "skipped_budget", "small": "fired", "capped": "skipped_cap"}
    assert doc["budget"] == 100
    assert doc["fired"] == [{"provider_name": "small", "tokens": doc["used_tokens"]}]
    assert doc["skipped"] == ["capped", "big"]  # cap skips, then budget skips
    by_name = {o["name"]: o for o in doc["outcomes"]}
    assert by_name["big"]["priority"] == 1 and by_name["capped"]["max_tokens"] == 10
    assert "did not fit" in by_name["big"]["reason"]
    assert "over its cap of 10" in by_name["capped"]["reason"]


def test_agentium_face_tags_in_list_order_and_counts_tagged_blocks(notes, profile_db):
    doc = resolve_json("--face", "agentium", "--user", "u1",
                       "--sqlite", f"profile={profile_db}", "--sql", SQL,
                       "--fs", f"notes={notes}", "--glob", "phone.md")
    assert doc["face"] == "agentium"
    assert doc["budget"] is None  # agentium has no budget unless one is given
    assert doc["context"] == (tag_block("profile", "name: Ada\nplan: Team") + "\n\n"
                              + tag_block("notes", "# phone.md\nPhone support is on "
                                                   "Enterprise only.\n"))
    assert "text" not in doc  # both faces call the rendered string "context"
    assert doc["used_tokens"] == sum(o["tokens"] for o in doc["outcomes"])


def test_agentium_face_notes_ignored_priorities_on_one_stderr_line(notes):
    proc = run_cli("resolve", "--face", "agentium", "--fs", f"n={notes}", "--priority", "3")
    assert proc.returncode == 0
    assert proc.stderr.count("\n") == 1
    assert "no priorities or caps" in proc.stderr
    assert proc.stderr.rstrip().endswith("ignored for n")


# -- config ------------------------------------------------------------------------

def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_toml_config_declares_providers_with_paths_relative_to_it(notes, profile_db,
                                                                  tmp_path):
    config = write_config(tmp_path / "lionctx.toml", f"""
query = "phone?"
user = "u1"
budget = 500
concurrent = true

[[providers]]
kind = "fs"
name = "kb"
path = "notes"
glob = "phone.md"
priority = 2
cap = 400

[[providers]]
kind = "sqlite"
name = "who"
database = "{profile_db.name}"
sql = "{SQL}"
priority = 3
""")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    doc = resolve_json("--config", str(config), cwd=elsewhere)
    assert doc["query"] == "phone?" and doc["user"] == "u1" and doc["budget"] == 500
    assert [(o["name"], o["status"], o["priority"], o["max_tokens"])
            for o in doc["outcomes"]] == [("kb", "fired", 2, 400), ("who", "fired", 3, None)]
    assert 'name: Ada' in doc["context"]

    # flags override the file's settings and add sources after its providers
    doc = resolve_json("--config", str(config), "--budget", "12", "--user", "u2",
                       "--fs", f"extra={notes}", cwd=elsewhere)
    assert doc["budget"] == 12 and doc["user"] == "u2"
    assert [o["name"] for o in doc["outcomes"]] == ["kb", "who", "extra"]


def test_config_http_options_reach_the_provider(server, tmp_path):
    config = write_config(tmp_path / "c.toml", f"""
face = "agentium"
[[providers]]
kind = "http"
url = "{server.url}/text?body=ok"
name = "feed"
max_response_bytes = 1
""")
    doc = resolve_json("--config", str(config))
    (outcome,) = doc["outcomes"]
    assert outcome["status"] == "failed" and outcome["error_type"] == "SourceUnavailable"
    assert "max_response_bytes (1)" in outcome["error"]
    assert doc["context"] == ""


# -- errors: exit 2, one line, no traceback -----------------------------------------

BAD_CONFIGS = {
    "invalid.toml": "providers = [",
    "unknown-top.toml": "budgett = 3\n",
    "unknown-key.toml": '[[providers]]\nkind = "fs"\npath = "."\ngloob = "*.md"\n',
    "bad-kind.toml": '[[providers]]\nkind = "ftp"\n',
    "no-target.toml": '[[providers]]\nkind = "http"\n',
    "bad-budget.toml": 'budget = "lots"\n[[providers]]\nkind = "fs"\npath = "."\n',
    "bad-timeout.toml": 'timeout = -1\n[[providers]]\nkind = "fs"\npath = "."\n',
    "bad-option.toml": '[[providers]]\nkind = "fs"\npath = "."\nmax_files = 0\n',
    "bad-option-type.toml": '[[providers]]\nkind = "fs"\npath = "."\nmax_files = "x"\n',
    "no-sql.toml": '[[providers]]\nkind = "sqlite"\ndatabase = "x.db"\n',
    "bad-glob.toml": '[[providers]]\nkind = "fs"\npath = "."\nglob = "*.[md"\n',
    "empty.toml": "",
}


def bad_invocations(notes: Path, tmp_path: Path, url: str) -> list[list[str]]:
    configs = []
    for name, text in BAD_CONFIGS.items():
        configs.append(["--config", str(write_config(tmp_path / name, text))])
    return [
        [],
        ["--fs"],
        ["--glob", "*.md"],
        ["--fs", str(notes), "--sql", "SELECT 1"],
        ["--fs", str(notes), "--name", "a", "--name", "b"],
        ["--fs", str(tmp_path / "missing")],
        ["--fs", str(notes), "--glob", "../*.md"],
        ["--fs", str(notes), "--glob", "["],
        ["--fs", str(notes), "--glob", "{*.md,*.[tx}"],
        ["--fs", f"a={notes}", "--fs", f"a={notes}"],
        ["--sqlite", str(tmp_path / "missing.db"), "--sql", SQL],
        ["--sqlite", str(tmp_path / "x.db")],
        ["--http", "ftp://127.0.0.1/x"],
        ["--http", url, "--cap", "0"],
        ["--http", url, "--budget", "-1"],
        ["--http", url, "--timeout", "0"],
        ["--http", url, "--deadline", "nan"],
        ["--http", url, "--priority", "high"],
        ["--http", url, "--face", "autogen"],
        ["--http", url, "--format", "xml"],
        ["--http", url, "--no-such-flag"],
        ["--config", str(tmp_path / "missing.toml")],
        *configs,
    ]


def test_bad_arguments_exit_2_with_one_line(notes, profile_db, tmp_path, server):
    (tmp_path / "x.db").write_bytes(profile_db.read_bytes())
    for args in bad_invocations(notes, tmp_path, f"{server.url}/text"):
        proc = run_cli("resolve", *args)
        where = f"lionctx resolve {' '.join(args)}"
        assert proc.returncode == 2, (where, proc.stdout, proc.stderr)
        assert proc.stdout == "", where
        assert proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, (where, proc.stderr)
        assert "Traceback" not in proc.stderr, where
        assert "error:" in proc.stderr, where
    assert server.paths == []  # nothing was fetched by a run that refused its arguments


def test_an_sql_write_is_refused_before_anything_runs(profile_db):
    proc = run_cli("resolve", "--sqlite", str(profile_db), "--sql", "DELETE FROM users")
    assert proc.returncode == 2
    assert "read-only" in proc.stderr and proc.stderr.count("\n") == 1


def test_errors_never_show_url_credentials_or_header_values(tmp_path, server):
    secret = "tok-0123456789abcdef"
    proc = run_cli("resolve", "--http", f"http://user:{secret}@127.0.0.1:1/x?key={secret}",
                   "--name", "a", "--name", "b")
    assert proc.returncode == 2
    assert secret not in proc.stderr
    config = write_config(tmp_path / "h.toml", f"""
[[providers]]
kind = "http"
url = "{server.url}/text"
headers = {{Authorization = "Bearer {secret}"}}
allowed_hosts = ["example.com"]
""")
    proc = run_cli("resolve", "--config", str(config))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "allowed_hosts" in proc.stderr
    assert secret not in proc.stderr


def test_missing_tomllib_is_a_clear_one_line_error(tmp_path):
    # Python 3.10 without tomli, simulated by hiding both modules from the import system.
    config = write_config(tmp_path / "c.toml", 'budget = 1\n')
    code = ("import sys; sys.modules['tomllib'] = None; sys.modules['tomli'] = None; "
            "from lionctx.cli import main; sys.exit(main(sys.argv[1:]))")
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code, "resolve", "--config", str(config)],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "Python 3.11+" in proc.stderr and "tomli" in proc.stderr


# -- terminals ---------------------------------------------------------------------

def test_colour_only_on_a_terminal_and_never_with_no_color(notes):
    rc, out, _ = run_cli_on_pty("resolve", "--fs", str(notes), stdout_tty=True,
                                stderr_tty=False)
    assert rc == 0 and ANSI in out
    rc, out, _ = run_cli_on_pty("resolve", "--fs", str(notes), stdout_tty=True,
                                stderr_tty=False,
                                env=clean_env(TERM="xterm", NO_COLOR="1"))
    assert rc == 0 and ANSI not in out and "fired" in out
    forced = run_cli("resolve", "--fs", str(notes), "--color", "always")
    assert ANSI in forced.stdout


def test_live_status_line_on_a_terminal_stderr_while_a_source_is_slow(notes, server):
    args = ("resolve", "--concurrent", "--timeout", "1", "--fs", f"notes={notes}",
            "--http", f"slow={server.url}/slow?s=30")
    rc, out, err = run_cli_on_pty(*args, stdout_tty=False, stderr_tty=True)
    assert rc == 0
    assert "waiting for slow" in err
    assert "notes ok" in err
    assert err.endswith("\r\x1b[2K")  # erased when the pass ends
    assert "resolving" not in out
    # not a terminal: nothing on stderr at all
    proc = run_cli(*args)
    assert proc.returncode == 0 and proc.stderr == ""


# -- entry points ----------------------------------------------------------------

def test_bare_command_prints_help_and_version_works():
    proc = run_cli()
    assert proc.returncode == 0
    assert "demo" in proc.stdout and "resolve" in proc.stdout
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("lionctx ")


def test_resolve_help_documents_the_source_syntax():
    proc = run_cli("resolve", "--help")
    assert proc.returncode == 0
    for text in ("--fs notes=./docs --priority 2 --cap 400", "[[providers]]", "--glob",
                 "--sqlite", "--face", "NO_COLOR"):
        assert text in proc.stdout


def test_console_script_runs_the_same_command(notes):
    script = Path(sys.executable).parent / "lionctx"
    if not script.exists():
        pytest.skip("the lionctx console script is not installed next to this python")
    import subprocess

    proc = subprocess.run([str(script), "resolve", "--fs", str(notes), "--format", "json"],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcomes"][0]["status"] == "fired"


# -- review fixes: escapes, closing, invalid globs, JSON purity -----------

# Retitles the terminal, rings the bell, clears the screen; a CSI as one C1
# character; a right-to-left override that makes "exe.png" read as "gnp.exe".
HOSTILE = "title\x1b]0;pwned\x07\x1b[2J csi\x9b31m del\x7f \u202egnp.exe\u202c \u2066iso\u2069 end"
RAW = ["\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\u202c", "\u2066", "\u2069"]


def hostile_sources(server, tmp_path, profile_db) -> list[str]:
    from urllib.parse import quote

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "evil\x1b[2J.md").write_text("file \x1b]0;x\x07 text\n")
    return ["--http", f"{server.url}/text?body={quote(HOSTILE)}", "--name", "feed\x1b[31m",
            "--fs", str(folder),
            # fails at run time with a reason that quotes the table name
            "--sqlite", str(profile_db), "--sql", 'SELECT 1 FROM "gone\x1b[2J"']


def test_text_output_spells_out_control_and_bidi_characters(server, tmp_path, profile_db):
    proc = run_cli("resolve", "-vv", *hostile_sources(server, tmp_path, profile_db))
    assert proc.returncode == 0, proc.stderr
    for stream in (proc.stdout, proc.stderr):
        assert not [c for c in RAW if c in stream]
    out = proc.stdout
    assert ("title\\x1b]0;pwned\\x07\\x1b[2J csi\\x9b31m del\\x7f \\u202egnp.exe\\u202c "
            "\\u2066iso\\u2069 end") in out
    assert "# evil\\x1b[2J.md\nfile \\x1b]0;x\\x07 text" in out
    table = rows(out)
    assert table["feed\\x1b[31m"][2] == "fired"
    assert table["profile"][2] == "failed"
    assert 'no such table: gone\\x1b[2J' in " ".join(table["profile"])
    assert "gone\\x1b[2J" in proc.stderr  # -vv logs quote it, spelled out too


def test_json_output_keeps_the_exact_text_and_nothing_else_on_stdout(server, tmp_path,
                                                                    profile_db):
    proc = run_cli("resolve", "-vv", "--format", "json",
                   *hostile_sources(server, tmp_path, profile_db))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr  # -vv: the logs went to stderr...
    doc = json.loads(proc.stdout)  # ...and stdout is the JSON document alone
    assert not [c for c in RAW if c in proc.stdout + proc.stderr]
    assert doc["context"].startswith(tag_block("feed\x1b[31m", HOSTILE) + "\n\n")
    assert "# evil\x1b[2J.md\nfile \x1b]0;x\x07 text\n" in doc["context"]
    by_name = {o["name"]: o for o in doc["outcomes"]}
    assert list(by_name) == ["feed\x1b[31m", "kb", "profile"]
    assert "no such table: gone\x1b[2J" in by_name["profile"]["reason"]
    for outcome in doc["outcomes"]:
        for key in ("status", "reason", "tokens", "duration_ms", "source"):
            assert key in outcome, (key, outcome)
        took = outcome["duration_ms"]  # present and a float; its size is for benchmarks
        assert isinstance(took, float) and took >= 0
    assert [o["status"] for o in doc["outcomes"]] == ["fired", "fired", "failed"]
    assert by_name["kb"]["tokens"] > 0 and by_name["kb"]["reason"] is None


def test_an_invalid_glob_is_exit_2_naming_it(notes, tmp_path):
    for glob in ("[", "*.[md", "docs/[!/x.md"):
        proc = run_cli("resolve", "--fs", str(notes), "--glob", glob)
        assert proc.returncode == 2, (glob, proc.stdout)
        assert proc.stdout == ""
        assert proc.stderr.count("\n") == 1
        assert f"glob {glob!r} has a '[' with no closing ']'" in proc.stderr
    # a literal "[" written as a class, and an ordinary class, still work
    (notes / "[draft].md").write_text("draft\n")
    doc = resolve_json("--fs", str(notes), "--glob", "[[]draft].md")
    assert doc["outcomes"][0]["status"] == "fired" and "draft" in doc["context"]
    doc = resolve_json("--fs", str(notes), "--glob", "[pr]*.md")
    assert "# phone.md" in doc["context"] and "# refunds.md" in doc["context"]


def test_a_bad_later_source_is_exit_2_and_leaks_nothing(server, profile_db, tmp_path):
    proc = run_cli("resolve", "--http", f"{server.url}/text",
                   "--sqlite", str(profile_db), "--sql", SQL,
                   "--fs", str(tmp_path / "missing"),
                   env=clean_env(PYTHONDEVMODE="1", PYTHONWARNINGS="always"))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "is not a directory" in proc.stderr
    for leak in ("ResourceWarning", "unclosed", "Traceback", "Task was destroyed"):
        assert leak not in proc.stderr
    assert server.paths == []


@pytest.mark.anyio
async def test_a_provider_that_fails_to_close_hides_no_result_and_no_other_close(
        server, notes):
    from lionctx.cli import build_parser
    from lionctx.cli._resolve import make_plan, open_providers, run_plan
    from lionctx.providers import FilesystemContextProvider, HttpContextProvider

    closed: list[str] = []

    class BadClose(FilesystemContextProvider):
        async def aclose(self) -> None:
            closed.append(self.name)
            raise OSError("cannot close")

    class Http(HttpContextProvider):
        async def aclose(self) -> None:
            used = self._client.value is not None  # it fetched: it holds a client
            await super().aclose()
            closed.append(f"{self.name} (client {'closed' if used else 'never made'})")

    args = build_parser().parse_args(["resolve", "--format", "json", "--fs", f"a={notes}",
                                      "--http", f"b={server.url}/text?body=up",
                                      "--fs", f"c={notes}"])
    plan = make_plan(args)

    def build(spec):
        if spec.kind == "http":
            return Http(spec.target, name=spec.name)
        return BadClose(spec.target, name=spec.name)

    async with open_providers(plan, build) as providers:
        result = await run_plan(plan, providers)
    assert [o.status.value for o in result.report.outcomes] == ["fired", "fired", "fired"]
    assert tag_block("b", "up") in result.context
    assert closed == ["a", "b (client closed)", "c"]

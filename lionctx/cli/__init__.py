"""The ``lionctx`` command: ``lionctx demo``, ``lionctx resolve`` and ``lionctx mcp serve``.

Exit status: 0 when the command ran (a resolve whose sources failed still ran), 1 when
the demo's model call failed, 2 for bad arguments or config, 130 when interrupted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._exceptions import UsageError
from . import _sources
from ._mcp_serve import add_mcp_parser  # the MCP SDK itself is imported when serving
from ._resolve import DEFAULT_TIMEOUT, cmd_resolve
from ._sources import arg_type
from ._terminal import visible

__all__ = ["EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "UsageError",
           "build_parser", "main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_POSITIVE = arg_type(positive=True)


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    return run_demo(color=args.color, offline=args.offline, timeout=args.timeout)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``lionctx resolve: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        shown = visible(_sources.one_line(message), multiline=False)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {shown} (see '{self.prog} --help')\n")


_RESOLVE_HELP = """\
sources: --fs, --http and --sqlite are repeatable, one provider each, in order;
  --name, --priority, --cap, --volatile, --glob, --max-files, --max-file-size and
  --sql apply to the source just before them, so these two are the same:
      --fs notes=./docs --priority 2 --cap 400
      --fs ./docs --name notes --priority 2 --cap 400
  A source's name defaults to the last part of its path, or host[:port]/path of
  its URL. Write a path that contains "=" as ./a=b. Priorities and caps are used by
  the lionagi face (higher priority survives a budget conflict; a block over its cap
  is skipped); the agentium face admits in source order and has neither.

config file (--config FILE, TOML): top-level query, user, tenant, budget, timeout,
deadline, face, concurrent; then one [[providers]] table per source with kind, name,
priority, cap, volatile and the keys of its kind (paths relative to the file):
{kinds}
Sources from flags come after the config's; flags override its settings.

output: colour on a terminal unless NO_COLOR is set; a status line on stderr
while sources run, when it is a terminal. Exit status: 0 when the resolve ran, even
if sources failed; 2 for bad arguments or an unreadable config.
"""

# flag, (field, kinds it follows), argparse keywords: each modifies the source before it
_MODIFIERS: list[tuple[str, tuple[str, tuple[str, ...]], dict[str, Any]]] = [
    ("--glob", ("glob", ("fs",)),
     {"metavar": "PATTERN", "help": "which files of the --fs before it"}),
    ("--max-files", ("options.max_files", ("fs",)),
     {"type": arg_type(whole=True, minimum=1), "metavar": "N",
      "help": "files the --fs before it includes at most (default 20; the rest are reported)"}),
    ("--max-file-size", ("options.max_file_size", ("fs",)),
     {"type": arg_type(whole=True, minimum=0), "metavar": "BYTES",
      "help": "largest file the --fs before it includes (default 102400)"}),
    ("--sql", ("sql", ("sqlite",)),
     {"metavar": "QUERY", "help": "the query for the --sqlite before it (required)"}),
    ("--name", ("name", _sources.KINDS),
     {"metavar": "NAME", "help": "name of the source before it"}),
    ("--priority", ("priority", _sources.KINDS),
     {"type": arg_type(), "metavar": "N",
      "help": "priority of the source before it (default 0)"}),
    ("--cap", ("cap", _sources.KINDS),
     {"type": arg_type(whole=True, minimum=1), "metavar": "TOKENS",
      "help": "token cap of the source before it"}),
    ("--volatile", ("volatile", _sources.KINDS),
     {"nargs": 0, "help": "the source before it changes every turn: render it after the "
                          "stable ones (prompt caches)"}),
]


def _verbose(parser: argparse.ArgumentParser | Any, color: str | None = None) -> None:
    """``-v``, after ``--color`` (helped by ``color``) when given."""
    if color is not None:
        parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                            help=color)
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log warnings (-v) or debug detail (-vv) to stderr")


def build_parser() -> argparse.ArgumentParser:
    """The ``lionctx`` argument parser."""
    from .. import __version__

    parser = _Parser(prog="lionctx", description="Pre-turn context for LLM agents: gather "
                     "from many sources, fit a token budget, inject for one request, report "
                     "every source.")
    parser.add_argument("--version", action="version", version=f"lionctx {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    demo = sub.add_parser(
        "demo", help="show lionctx at work on built-in sample sources (offline)",
        description="Start sample sources (notes in a temp folder, a SQLite user profile, "
                    "an HTTP status endpoint on 127.0.0.1), resolve context for a sample "
                    "question through both faces, print the reports and the system "
                    "prompt, then run one agent turn: against OPENAI_BASE_URL / "
                    "OPENAI_API_KEY when set, else against a bundled offline echo model. "
                    "Everything it starts is stopped and removed before it exits.")
    demo.add_argument("--offline", action="store_true",
                      help="use the offline echo model even when OPENAI_* is set")
    demo.add_argument("--timeout", type=_POSITIVE, default=0.5, metavar="SECONDS",
                      help="per-source timeout (default 0.5; the sample incidents "
                           "endpoint takes 30 s, to show a contained timeout)")
    _verbose(demo, "colour output (default: auto, i.e. on a terminal unless NO_COLOR is set)")
    demo.set_defaults(handler=_cmd_demo)

    res = sub.add_parser(
        "resolve", help="dry-run an agent's context: resolve sources and report",
        description="Resolve context from the given sources for one query, as an agent "
                    "would right before its model call, and show what each source did.",
        epilog=_RESOLVE_HELP.format(kinds="\n".join(
            f"  {kind}: {', '.join(keys)}" for kind, keys in _sources.CONFIG_KEYS.items())),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = res.add_argument_group("sources")
    for kind, metavar, text in (
            ("fs", "[NAME=]PATH", "the files under PATH matching --glob (default **/*.md)"),
            ("http", "[NAME=]URL", "the body of a GET to URL; only its own host is allowed"),
            ("sqlite", "[NAME=]DB", "the rows of --sql from the SQLite file DB, read-only; "
                                    "the query may use :query, :user_id, :tenant_id, "
                                    ":session_id and :run_id")):
        src.add_argument(f"--{kind}", action=_sources.SourceAction, const=kind, metavar=metavar,
                         dest="sources", help=text)
    for flag, const, keywords in _MODIFIERS:
        src.add_argument(flag, action=_sources.ModifierAction, const=const, **keywords)
    src.add_argument("--config", metavar="FILE", help="a TOML file declaring sources")
    opts = res.add_argument_group("resolve options")
    opts.add_argument("--query", "-q", help="the user's question (default: empty)")
    opts.add_argument("--user", help="the user id providers see (RunContext.user_id)")
    opts.add_argument("--tenant", help="the tenant id providers see")
    opts.add_argument("--budget", type=arg_type(minimum=0), metavar="TOKENS",
                      help="total tokens kept (default 2000 for lionagi, none for agentium)")
    opts.add_argument("--timeout", type=_POSITIVE, metavar="SECONDS",
                      help=f"per-source timeout (default {DEFAULT_TIMEOUT:g})")
    opts.add_argument("--deadline", type=_POSITIVE, metavar="SECONDS",
                      help="deadline for the whole pass (default none)")
    opts.add_argument("--face", choices=("lionagi", "agentium"),
                      help="lionagi: a ContextProviderRegistry pass (default); agentium: "
                           "resolve_context (concurrent, list order)")
    opts.add_argument("--concurrent", action="store_true", default=None,
                      help="lionagi face: run sources together (default: one by one, as "
                           "LionAGI does)")
    opts.add_argument("--turns", type=arg_type(whole=True, minimum=1), metavar="N", default=1,
                      help="resolve N times in a row and report, for each turn after the "
                           "first, whether the injected prefix stayed byte-identical (prompt "
                           "caches) or which block broke it (default 1)")
    out = res.add_argument_group("output")
    out.add_argument("--format", choices=("text", "json"), default="text",
                     help="text for people (default), json for scripts")
    _verbose(out, "colour in text output (default: auto)")
    res.set_defaults(handler=cmd_resolve)

    add_mcp_parser(sub, _verbose)
    return parser


class _VisibleFormatter(logging.Formatter):
    """Log lines can quote a source's words: controls are spelled out on stderr too."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))


def _configure_logging(verbose: int) -> None:
    # The report carries every failure; logs (with their tracebacks) only on request.
    if verbose <= 0:
        logging.getLogger().addHandler(logging.NullHandler())
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_VisibleFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.WARNING,
                        handlers=[handler])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``lionctx`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if (handler := getattr(args, "handler", None)) is None:
        parser.print_help()
        return EXIT_OK
    _configure_logging(getattr(args, "verbose", 0))
    try:
        return int(handler(args))
    except UsageError as exc:
        shown = visible(_sources.one_line(str(exc)), multiline=False)
        print(f"lionctx {args.command}: error: {shown}", file=sys.stderr)
        return EXIT_USAGE
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Outside a loop both are Ctrl-C (on 3.10 anyio.run() lets it out as the latter).
        print(f"lionctx {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `lionctx resolve ... | head`: the reader left; that is not an error.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the final flush
        return EXIT_OK


def __dir__() -> list[str]:
    return sorted(__all__)

"""Sources of ``lionctx resolve``: the flags, the TOML config, and the providers they build.

Flags: ``--fs [NAME=]PATH``, ``--http [NAME=]URL``, ``--sqlite [NAME=]DB`` each add a
source; ``--name``, ``--priority``, ``--cap``, ``--glob``, ``--max-files``,
``--max-file-size`` and ``--sql`` modify the source just before them. A config file declares
the same sources as
``[[providers]]`` tables. Every user mistake becomes a :class:`UsageError` whose
message names the bad value and where it was written.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._exceptions import InvalidValue, UsageError

__all__ = ["KINDS", "SourceSpec", "UsageError", "assign_names", "build_provider",
           "arg_type", "check_glob", "check_number", "one_line", "parse_float",
           "parse_int", "read_config", "tidy_number"]

KINDS = ("fs", "http", "sqlite")
#: Kinds a config file may declare: the flag kinds, and MCP resources.
CONFIG_KINDS = (*KINDS, "mcp")
_FLAG_OF_KIND = {"fs": "--fs", "http": "--http", "sqlite": "--sqlite"}
# "NAME=" in front of a source's target. A path that contains "=" is written "./a=b",
# which this does not match; neither does a URL ("http://...").
_NAMED = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*)=(.+)$", re.DOTALL)


@dataclass
class SourceSpec:
    """One provider as the user declared it, before it is built."""

    kind: str
    target: str
    origin: str
    """How the user wrote it, for error messages: ``--fs ./docs`` or ``providers[2]``."""
    name: str | None = None
    priority: float = 0
    cap: int | None = None
    glob: str | None = None
    sql: str | None = None
    volatile: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    set_fields: set[str] = field(default_factory=set)


def parse_float(text: str, label: str, *, positive: bool = False,
                minimum: float | None = None) -> float:
    """``text`` as a finite number; ``label`` names it in the error."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{label} must be a number, got {text!r}") from None
    return check_number(value, label, positive=positive, minimum=minimum, shown=repr(text))


def check_number(value: float, label: str, *, positive: bool = False,
                 minimum: float | None = None, shown: str | None = None) -> float:
    """``value`` if finite (and > 0, or >= ``minimum``, when asked); else a UsageError."""
    shown = shown if shown is not None else repr(value)
    if math.isnan(value) or math.isinf(value):
        raise UsageError(f"{label} must be a finite number, got {shown}")
    if positive and not value > 0:
        raise UsageError(f"{label} must be greater than 0, got {shown}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{label} must be >= {minimum:g}, got {shown}")
    return value


def tidy_number(value: float) -> float:
    """``2.0`` -> ``2``: whole numbers print and serialise as ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def parse_int(text: str, label: str, minimum: int) -> int:
    """``text`` as an int >= ``minimum``; ``label`` names it in the error."""
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{label} must be a whole number, got {text!r}") from None
    if value < minimum:
        raise UsageError(f"{label} must be >= {minimum}, got {text!r}")
    return value


def arg_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type`` from a parser that raises UsageError."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def _shown(kind: str, target: str) -> str:
    """A target as error messages may show it: a URL loses credentials and query."""
    if kind != "http":
        return target
    from ..providers._redact import public_url

    return public_url(target, mark_query=True)


class SourceAction(argparse.Action):
    """``--fs [NAME=]PATH``, ``--http [NAME=]URL``, ``--sqlite [NAME=]DB``: a new source."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        kind = self.const
        text = str(values)
        name: str | None = None
        match = _NAMED.match(text)
        if match:
            name, text = match.group(1), match.group(2)
        if not text:
            raise argparse.ArgumentError(self, "needs a value")
        shown = f"{name}={_shown(kind, text)}" if name is not None else _shown(kind, text)
        spec = SourceSpec(kind, text, f"{option_string} {shown}", name=name)
        if name is not None:
            spec.set_fields.add("name")
        sources = getattr(namespace, "sources", None) or []
        sources.append(spec)
        namespace.sources = sources


class ModifierAction(argparse.Action):
    """``--name/--priority/--cap/--glob/--max-files/--max-file-size/--sql``: applies to
    the source just before it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        field_name, kinds = self.const
        sources = getattr(namespace, "sources", None) or []
        if not sources:
            need = " or ".join(_FLAG_OF_KIND[k] for k in kinds)
            raise argparse.ArgumentError(self, f"must follow a source ({need})")
        spec = sources[-1]
        if spec.kind not in kinds:
            need = " or ".join(_FLAG_OF_KIND[k] for k in kinds)
            raise argparse.ArgumentError(
                self, f"applies to {need} sources, but the source before it is {spec.origin}")
        if field_name in spec.set_fields:
            raise argparse.ArgumentError(self, f"given twice for {spec.origin}")
        spec.set_fields.add(field_name)
        value = True if self.nargs == 0 else values
        if field_name.startswith("options."):
            # A constructor keyword of the provider (--max-files -> max_files).
            spec.options[field_name[len("options."):]] = value
        else:
            setattr(spec, field_name, value)


# -- config ------------------------------------------------------------------------

_TOP_KEYS = {"query", "user", "tenant", "budget", "timeout", "deadline", "face",
             "concurrent", "providers"}
_COMMON_KEYS = {"kind", "name", "priority", "cap", "volatile"}
_KIND_KEYS: dict[str, dict[str, str]] = {
    # config key -> constructor keyword ("" for the target, "glob"/"sql" for the spec)
    "fs": {"path": "", "glob": "glob", "encoding": "encoding",
           "max_file_size": "max_file_size", "max_files": "max_files"},
    "http": {"url": "", "method": "method", "headers": "headers",
             "allowed_hosts": "allowed_hosts", "max_response_bytes": "max_response_bytes",
             "max_redirects": "max_redirects", "body": "body"},
    "sqlite": {"database": "", "sql": "sql", "max_rows": "max_rows", "params": "params",
               "busy_timeout": "busy_timeout"},
    "mcp": {"server": "", "uri": "uri", "max_chars": "max_chars",
            "connect_timeout": "connect_timeout", "headers": "headers",
            "allowed_hosts": "allowed_hosts", "env": "env", "cwd": "cwd"},
}
_TARGET_KEY = {"fs": "path", "http": "url", "sqlite": "database", "mcp": "server"}


def _load_toml(path: Path) -> dict[str, Any]:
    from ..engines._config import load_toml, read_config_bytes  # the one TOML reader

    try:
        data = read_config_bytes(path)
    except OSError as exc:
        raise UsageError(f"cannot read --config {path}: {exc.strerror or exc}") from None
    except InvalidValue as exc:  # over the size limit
        raise UsageError(f"--config {path}: {one_line(str(exc))}") from None
    try:
        return load_toml(data)
    except ImportError as exc:
        raise UsageError(f"cannot read --config {path}: {exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--config {path} is not UTF-8 text") from None
    except InvalidValue as exc:  # valid TOML, but too large or nested too deep
        raise UsageError(f"--config {path}: {one_line(str(exc))}") from None
    except ValueError as exc:
        raise UsageError(f"--config {path} is not valid TOML: {one_line(str(exc))}") from None


def one_line(text: str) -> str:
    """``text`` on one line: every run of whitespace becomes one space."""
    return " ".join(text.split())


def _check_type(value: Any, types: tuple[type, ...], where: str, what: str) -> Any:
    if isinstance(value, bool) and bool not in types:
        raise UsageError(f"{where} must be {what}, got {value!r}")
    if not isinstance(value, types):
        raise UsageError(f"{where} must be {what}, got {value!r}")
    return value


def _config_number(value: Any, where: str, *, positive: bool = False,
                   minimum: float | None = None) -> float:
    _check_type(value, (int, float), where, "a number")
    return check_number(value, where, positive=positive, minimum=minimum)


def read_config(path: Path) -> tuple[dict[str, Any], list[SourceSpec]]:
    """Settings and sources from a TOML file; relative paths are from its folder."""
    data = _load_toml(path)
    where = f"--config {path}"
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (known: "
                         f"{', '.join(sorted(_TOP_KEYS))})")
    settings: dict[str, Any] = {}
    for key in ("query", "user", "tenant"):
        if key in data:
            settings[key] = _check_type(data[key], (str,), f"{where}: {key}", "a string")
    if "face" in data:
        face = data["face"]
        if face not in ("lionagi", "agentium"):
            raise UsageError(f"{where}: face must be 'lionagi' or 'agentium', got {face!r}")
        settings["face"] = face
    if "budget" in data:
        settings["budget"] = _config_number(data["budget"], f"{where}: budget", minimum=0)
    for key in ("timeout", "deadline"):
        if key in data:
            settings[key] = _config_number(data[key], f"{where}: {key}", positive=True)
    if "concurrent" in data:
        settings["concurrent"] = _check_type(data["concurrent"], (bool,),
                                             f"{where}: concurrent", "true or false")
    providers = data.get("providers", [])
    if not isinstance(providers, list) or not all(isinstance(p, dict) for p in providers):
        raise UsageError(f"{where}: providers must be an array of tables ([[providers]])")
    base = path.parent
    specs = [_config_source(p, i, base, where) for i, p in enumerate(providers)]
    return settings, specs


def _config_source(table: dict[str, Any], index: int, base: Path, where: str) -> SourceSpec:
    at = f"{where}: providers[{index}]"
    kind = table.get("kind")
    if kind not in CONFIG_KINDS:
        raise UsageError(f"{at}: kind must be one of {', '.join(CONFIG_KINDS)}, got {kind!r}")
    keys = _KIND_KEYS[kind]
    unknown = sorted(set(table) - _COMMON_KEYS - set(keys))
    if unknown:
        raise UsageError(f"{at}: unknown key {unknown[0]!r} for kind {kind!r} (known: "
                         f"{', '.join(sorted(_COMMON_KEYS | set(keys)))})")
    target_key = _TARGET_KEY[kind]
    if target_key not in table:
        raise UsageError(f"{at}: kind {kind!r} needs {target_key!r}")
    if kind == "mcp":
        target = _mcp_server(table[target_key], f"{at}.{target_key}")
        if "cwd" in table and isinstance(table["cwd"], str) and not os.path.isabs(table["cwd"]):
            table = {**table, "cwd": str(base / table["cwd"])}
    else:
        target = _check_type(table[target_key], (str,), f"{at}.{target_key}", "a string")
    if kind not in ("http", "mcp") and not os.path.isabs(target):
        target = str(base / target)  # relative to the config file, like pyproject.toml
    spec = SourceSpec(kind, target, at)
    if "name" in table:
        spec.name = _check_type(table["name"], (str,), f"{at}.name", "a string")
    if "priority" in table:
        spec.priority = _config_number(table["priority"], f"{at}.priority")
    if "cap" in table:
        cap = _check_type(table["cap"], (int,), f"{at}.cap", "a whole number of tokens")
        if cap < 1:
            raise UsageError(f"{at}.cap must be >= 1, got {cap!r}")
        spec.cap = cap
    if "volatile" in table:
        spec.volatile = _check_type(table["volatile"], (bool,), f"{at}.volatile", "true or false")
    for key, kw in keys.items():
        if key == target_key or key not in table:
            continue
        if kw in ("glob", "sql"):
            setattr(spec, kw, _check_type(table[key], (str,), f"{at}.{key}", "a string"))
        else:
            spec.options[kw] = table[key]
    return spec


def _mcp_server(value: Any, where: str) -> str:
    """An MCP ``server``: a URL or command string, or a command as a list of strings."""
    import shlex

    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    return str(_check_type(value, (str,), where, "a string or a list of strings"))


# -- building providers -------------------------------------------------------------

def check_glob(pattern: str, where: str) -> None:
    """A UsageError naming ``pattern`` unless the fs provider's matcher accepts it."""
    from ..providers._filesystem import GlobMatcher

    try:
        GlobMatcher(pattern)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: {one_line(str(exc))}") from None


def _default_name(spec: SourceSpec) -> str:
    if spec.kind == "mcp":
        from ..providers._mcp import _default_name as mcp_name

        uri = spec.options.get("uri")
        return mcp_name(uri) if isinstance(uri, str) and uri else "mcp"
    if spec.kind == "http":
        from ..providers._http import default_name

        try:  # the provider's own default: host[:port]/path
            return default_name(spec.target)
        except Exception:
            return "http"  # not a URL: building the provider will say so
    from ..providers._names import name_from_path

    # The same name the provider itself would take when unnamed.
    return name_from_path(spec.target, fallback=spec.kind, strip_suffix=spec.kind == "sqlite")


def assign_names(specs: Sequence[SourceSpec]) -> None:
    """Give every source a name: its own, else one from its target, made unique."""
    taken: set[str] = set()
    for spec in specs:
        if spec.name is not None:
            if not spec.name.strip():
                raise UsageError(f"{spec.origin}: name must not be empty")
            if spec.name in taken:
                raise UsageError(f"{spec.origin}: two sources are named {spec.name!r}")
            taken.add(spec.name)
    for spec in specs:
        if spec.name is None:
            base = _default_name(spec)
            name, n = base, 2
            while name in taken:
                name, n = f"{base}-{n}", n + 1
            spec.name = name
            taken.add(name)


def build_provider(spec: SourceSpec, timeout: float | None) -> Any:
    """The provider for one source; a bad option becomes a UsageError naming it."""
    try:
        if spec.kind == "fs":
            from ..providers._filesystem import FilesystemContextProvider

            if not os.path.isdir(spec.target):
                raise UsageError(f"{spec.origin}: {spec.target} is not a directory")
            kwargs = dict(spec.options)
            if spec.glob is not None:
                check_glob(spec.glob, spec.origin)
                kwargs["glob"] = spec.glob
            return FilesystemContextProvider(spec.target, name=spec.name, **kwargs)
        if spec.kind == "http":
            from ..providers._http import HttpContextProvider

            kwargs = dict(spec.options)
            if timeout is not None:
                # The pass's timeout decides (status "timeout"); the provider's own
                # is a backstop just behind it.
                kwargs.setdefault("timeout", timeout + 1.0)
            return HttpContextProvider(spec.target, name=spec.name, **kwargs)
        if spec.kind == "mcp":
            from ..providers._mcp import McpResourceProvider

            kwargs = dict(spec.options)
            if "uri" not in kwargs:
                raise UsageError(f"{spec.origin}: kind 'mcp' needs 'uri'")
            if timeout is not None:
                kwargs.setdefault("timeout", timeout + 1.0)  # the pass's timeout decides
            return McpResourceProvider(spec.target, kwargs.pop("uri"), name=spec.name,
                                       **kwargs)
        from ..providers._sqlite import SqliteContextProvider

        if spec.sql is None:
            raise UsageError(f"{spec.origin}: needs a query (--sql after it, or sql = "
                             "\"SELECT ...\" in the config)")
        if not os.path.isfile(spec.target):
            raise UsageError(f"{spec.origin}: no such database file: {spec.target}")
        return SqliteContextProvider(spec.target, spec.sql, name=spec.name, **spec.options)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{spec.origin}: {one_line(str(exc))}") from None

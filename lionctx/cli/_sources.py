"""Sources of ``lionctx resolve`` from its flags (``--fs``/``--http``/``--sqlite`` add one;
``--name``, ``--cap``... modify the one before) or a TOML config, and their providers.
Every mistake is a :class:`UsageError` naming the bad value and where it was written."""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._exceptions import InvalidValue, UsageError

__all__ = ["CONFIG_KEYS", "KINDS", "SourceSpec", "UsageError", "arg_type", "assign_names",
           "build_provider", "check_number", "one_line", "read_config"]

KINDS = ("fs", "http", "sqlite")
# "NAME=" before a target; not matched by "./a=b" (a path with "=") nor by a URL.
_NAMED = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*)=(.+)$", re.DOTALL)


@dataclass
class SourceSpec:
    """One provider as the user declared it, before it is built; ``origin`` is how the
    user wrote it, for error messages (``--fs ./docs``, ``providers[2]``)."""

    kind: str
    target: str
    origin: str
    name: str | None = None
    priority: float = 0
    cap: int | None = None
    glob: str | None = None
    sql: str | None = None
    volatile: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    set_fields: set[str] = field(default_factory=set)


def one_line(text: str) -> str:
    """``text`` on one line: every run of whitespace becomes one space."""
    return " ".join(text.split())


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


def arg_type(*, whole: bool = False, **checks: Any) -> Callable[[str], Any]:
    """An argparse ``type``: a number (an int when ``whole``) passing :func:`check_number`."""
    def convert(text: str) -> Any:
        try:
            value = int(text) if whole else float(text)
            return check_number(value, "value", shown=repr(text), **checks)
        except ValueError:
            what = "a whole number" if whole else "a number"
            raise argparse.ArgumentTypeError(f"value must be {what}, got {text!r}") from None
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
        text = str(values)
        name: str | None = None
        if match := _NAMED.match(text):
            name, text = match.group(1), match.group(2)
        if not text:
            raise argparse.ArgumentError(self, "needs a value")
        shown = _shown(self.const, text)
        spec = SourceSpec(self.const, text,
                          f"{option_string} {shown if name is None else f'{name}={shown}'}",
                          name=name, set_fields={"name"} if name is not None else set())
        namespace.sources = [*(getattr(namespace, "sources", None) or []), spec]


class ModifierAction(argparse.Action):
    """``--name``, ``--priority``, ``--glob``...: applies to the source just before it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        field_name, kinds = self.const
        sources = getattr(namespace, "sources", None) or []
        need = " or ".join(f"--{k}" for k in kinds)
        if not sources:
            raise argparse.ArgumentError(self, f"must follow a source ({need})")
        spec = sources[-1]
        if spec.kind not in kinds:
            raise argparse.ArgumentError(
                self, f"applies to {need} sources, but the source before it is {spec.origin}")
        if field_name in spec.set_fields:
            raise argparse.ArgumentError(self, f"given twice for {spec.origin}")
        spec.set_fields.add(field_name)
        value = True if self.nargs == 0 else values
        if field_name.startswith("options."):  # a provider keyword: --max-files -> max_files
            spec.options[field_name.removeprefix("options.")] = value
        else:
            setattr(spec, field_name, value)


_TOP_KEYS = {"query", "user", "tenant", "budget", "timeout", "deadline", "face",
             "concurrent", "providers"}
_COMMON_KEYS = {"kind", "name", "priority", "cap", "volatile"}
# Each kind's config keys: the target, then provider keywords ("glob", "sql": the spec's).
CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "fs": ("path", "glob", "encoding", "max_file_size", "max_files"),
    "http": ("url", "method", "headers", "allowed_hosts", "max_response_bytes",
             "max_redirects", "body"),
    "sqlite": ("database", "sql", "max_rows", "params", "busy_timeout"),
    "mcp": ("server", "uri", "max_chars", "connect_timeout", "headers", "allowed_hosts",
            "env", "cwd"),
}


def _load_toml(path: Path) -> dict[str, Any]:
    from ..engines._config import load_toml, read_config_bytes  # the one TOML reader

    try:
        return load_toml(read_config_bytes(path))
    except (OSError, ImportError) as exc:  # unreadable, or no TOML reader installed
        reason = getattr(exc, "strerror", None) or exc
        raise UsageError(f"cannot read --config {path}: {reason}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--config {path} is not UTF-8 text") from None
    except InvalidValue as exc:  # too large or nested too deep
        raise UsageError(f"--config {path}: {one_line(str(exc))}") from None
    except ValueError as exc:
        raise UsageError(f"--config {path} is not valid TOML: {one_line(str(exc))}") from None


# What a config key must hold: its types, the words for them, its number checks if any.
_TYPED: dict[str, tuple[tuple[type[Any], ...], str, dict[str, Any] | None]] = {
    "query": ((str,), "a string", None), "user": ((str,), "a string", None),
    "tenant": ((str,), "a string", None),
    "budget": ((int, float), "a number", {"minimum": 0}),
    "timeout": ((int, float), "a number", {"positive": True}),
    "deadline": ((int, float), "a number", {"positive": True}),
    "concurrent": ((bool,), "true or false", None),
    "name": ((str,), "a string", None), "priority": ((int, float), "a number", {}),
    "cap": ((int,), "a whole number of tokens", {"minimum": 1}),
    "volatile": ((bool,), "true or false", None),
    "glob": ((str,), "a string", None), "sql": ((str,), "a string", None),
}


def _typed(value: Any, key: str, where: str) -> Any:
    """``value`` of config key ``key`` (written at ``where``), checked by :data:`_TYPED`."""
    types, what, checks = _TYPED[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise UsageError(f"{where} must be {what}, got {value!r}")
    return value if checks is None else check_number(value, where, **checks)


def read_config(path: Path) -> tuple[dict[str, Any], list[SourceSpec]]:
    """Settings and sources from a TOML file; relative paths are from its folder."""
    data = _load_toml(path)
    where = f"--config {path}"
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (known: "
                         f"{', '.join(sorted(_TOP_KEYS))})")
    if data.get("face", "lionagi") not in ("lionagi", "agentium"):
        raise UsageError(f"{where}: face must be 'lionagi' or 'agentium', got {data['face']!r}")
    settings = {key: value if key == "face" else _typed(value, key, f"{where}: {key}")
                for key, value in data.items() if key != "providers"}
    providers = data.get("providers", [])
    if not isinstance(providers, list) or not all(isinstance(p, dict) for p in providers):
        raise UsageError(f"{where}: providers must be an array of tables ([[providers]])")
    return settings, [_config_source(p, f"{where}: providers[{i}]", path.parent)
                      for i, p in enumerate(providers)]


def _config_source(table: dict[str, Any], at: str, base: Path) -> SourceSpec:
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in CONFIG_KEYS:
        raise UsageError(f"{at}: kind must be one of {', '.join(CONFIG_KEYS)}, got {kind!r}")
    target_key, *keys = CONFIG_KEYS[kind]
    unknown = sorted(set(table) - _COMMON_KEYS - {target_key, *keys})
    if unknown:
        raise UsageError(f"{at}: unknown key {unknown[0]!r} for kind {kind!r} (known: "
                         f"{', '.join(sorted(_COMMON_KEYS | {target_key, *keys}))})")
    if target_key not in table:
        raise UsageError(f"{at}: kind {kind!r} needs {target_key!r}")
    target = table[target_key]
    if kind == "mcp" and isinstance(target, list) and target and all(
            isinstance(v, str) for v in target):
        target = shlex.join(target)  # a command as a list of strings
    if not isinstance(target, str):
        what = "a string or a list of strings" if kind == "mcp" else "a string"
        raise UsageError(f"{at}.{target_key} must be {what}, got {target!r}")
    if kind in ("fs", "sqlite") and not os.path.isabs(target):
        target = str(base / target)  # relative to the config file, like pyproject.toml
    spec = SourceSpec(kind, target, at)
    for key in ("name", "priority", "cap", "volatile", "glob", "sql"):
        if key in table:  # glob and sql only where the kind takes them (checked above)
            setattr(spec, key, _typed(table[key], key, f"{at}.{key}"))
    for key in keys:
        if key == "cwd" and isinstance(table.get(key), str):
            spec.options[key] = str(base / table[key])  # an absolute cwd stays as it is
        elif key in table and key not in ("glob", "sql"):
            spec.options[key] = table[key]
    return spec


def _default_name(spec: SourceSpec) -> str:
    """The name the provider itself would take when unnamed."""
    if spec.kind == "mcp":
        from ..providers._mcp import _default_name as mcp_name

        uri = spec.options.get("uri")
        return mcp_name(uri) if isinstance(uri, str) and uri else "mcp"
    if spec.kind == "http":
        from ..providers._http import default_name

        try:  # host[:port]/path
            return default_name(spec.target)
        except Exception:
            return "http"  # not a URL: building the provider will say so
    from ..providers._identity import name_from_path

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
            base = name = _default_name(spec)
            n = 2
            while name in taken:
                name, n = f"{base}-{n}", n + 1
            spec.name = name
            taken.add(name)


def build_provider(spec: SourceSpec, timeout: float | None) -> Any:
    """The provider for one source; a bad option becomes a UsageError naming it."""
    from ..providers import (
        FilesystemContextProvider,
        HttpContextProvider,
        McpResourceProvider,
        SqliteContextProvider,
    )

    kwargs = dict(spec.options)
    if timeout is not None and spec.kind in ("http", "mcp"):
        # The pass's timeout decides (status "timeout"); the provider's is a backstop.
        kwargs.setdefault("timeout", timeout + 1.0)
    try:
        if spec.kind == "fs":
            if not os.path.isdir(spec.target):
                raise UsageError(f"{spec.origin}: {spec.target} is not a directory")
            if spec.glob is not None:
                kwargs["glob"] = spec.glob  # the provider refuses a bad glob, naming it
            return FilesystemContextProvider(spec.target, name=spec.name, **kwargs)
        if spec.kind == "http":
            return HttpContextProvider(spec.target, name=spec.name, **kwargs)
        if spec.kind == "mcp":
            if "uri" not in kwargs:
                raise UsageError(f"{spec.origin}: kind 'mcp' needs 'uri'")
            return McpResourceProvider(spec.target, kwargs.pop("uri"), name=spec.name, **kwargs)
        if spec.sql is None:
            raise UsageError(f"{spec.origin}: needs a query (--sql after it, or sql = "
                             "\"SELECT ...\" in the config)")
        if not os.path.isfile(spec.target):
            raise UsageError(f"{spec.origin}: no such database file: {spec.target}")
        return SqliteContextProvider(spec.target, spec.sql, name=spec.name, **kwargs)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{spec.origin}: {one_line(str(exc))}") from None

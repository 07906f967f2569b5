"""Engine configuration: ``context`` sections from a dict, a YAML file or a TOML file
(pure; :func:`load_toml` is the package's one TOML reader, the CLI's too)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from .._exceptions import InvalidType, InvalidValue

__all__ = ["DEFAULT_ENGINE", "MAX_CONFIG_BYTES", "MAX_CONFIG_DEPTH", "SECTION_KEYS", "ConfigArg",
           "PathArg", "configured_engine_name", "context_section", "load_config", "load_toml",
           "read_config_bytes", "search_paths"]

DEFAULT_ENGINE = "compressor"

PathArg = str | PathLike[str]
ConfigArg = Mapping[str, Any] | PathArg | None

SECTION_KEYS = frozenset({"engine", "plugin_paths", "compressor", "select_context_timeout"})
#: The largest configuration file read, in bytes: configurations are a few KB.
MAX_CONFIG_BYTES = 1 << 20
#: How deep tables and arrays may nest in a configuration (ours use three levels).
MAX_CONFIG_DEPTH = 32


def read_config_bytes(path: PathArg) -> bytes:
    """A configuration file's bytes, read no further than :data:`MAX_CONFIG_BYTES` (a FIFO
    or ``/dev/zero`` ends there too): InvalidValue when larger."""
    with open(path, "rb") as f:
        data = f.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise InvalidValue(f"configuration {str(path)!r} is over {MAX_CONFIG_BYTES} bytes")
    return data


def _check_depth(data: Any, where: str) -> None:
    """InvalidValue when ``data`` nests deeper than :data:`MAX_CONFIG_DEPTH` (no recursion)."""
    todo: list[tuple[Any, int]] = [(data, 0)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            if depth >= MAX_CONFIG_DEPTH:
                raise InvalidValue(f"{where} nests tables or arrays more than "
                                   f"{MAX_CONFIG_DEPTH} levels deep")
            todo.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict)
                                                 else value))


def load_toml(raw: bytes) -> dict[str, Any]:
    """TOML from UTF-8 bytes (:func:`read_config_bytes` bounds their size), bounded in
    depth: ValueError for bad input, ImportError without a parser (Python < 3.11)."""
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        try:
            import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
        except ImportError:
            raise ImportError("TOML needs Python 3.11+ or the 'tomli' package "
                              "(pip install tomli)") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        # The parser recurses once per nested array or inline table.
        raise InvalidValue(f"TOML nests arrays or inline tables more than "
                           f"{MAX_CONFIG_DEPTH} levels deep") from None
    _check_depth(data, "TOML")
    return data


def load_config(path: PathArg) -> dict[str, Any]:
    """The mapping in a YAML (needs pyyaml) or TOML configuration file; ValueError for
    anything else, ImportError without the parser."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ImportError(f"reading the YAML configuration {str(file)!r} needs pyyaml; "
                              "install it with: pip install 'lionctx[yaml]'") from None
        text = read_config_bytes(file).decode("utf-8")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidValue(f"configuration {str(file)!r} is not valid YAML: {exc}") from None
        except RecursionError:
            raise InvalidValue(f"configuration {str(file)!r} nests more than "
                               f"{MAX_CONFIG_DEPTH} levels deep") from None
        _check_depth(data, f"configuration {str(file)!r}")
    elif suffix == ".toml":
        try:
            data = load_toml(read_config_bytes(file))
        except ImportError as exc:
            raise ImportError(f"reading the TOML configuration {str(file)!r}: {exc}") from None
        except ValueError as exc:  # not UTF-8, or not TOML
            raise InvalidValue(f"configuration {str(file)!r} is not valid TOML: {exc}") from None
    else:
        raise InvalidValue(f"configuration file {str(file)!r} must end in .yaml, .yml or .toml")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidValue(f"configuration {str(file)!r} must hold a mapping at the top, "
                           f"got {type(data).__name__}")
    return data


def context_section(config: ConfigArg) -> dict[str, Any]:
    """The ``context`` mapping of ``config`` (a mapping, a file path or None), checked."""
    if config is None:
        return {}
    base: Path | None = None
    if isinstance(config, (str, PathLike)):
        base = Path(config).parent
        config = load_config(config)
    if not isinstance(config, Mapping):
        raise InvalidType(
            f"config must be a mapping, a path to a YAML/TOML file, or None; got {config!r}")
    if (section := config.get("context", {})) is None:
        return {}
    if not isinstance(section, Mapping):
        raise InvalidValue(f"configuration 'context' must be a mapping, got {section!r}")
    section = dict(section)
    paths = section.get("plugin_paths")
    if base is not None and isinstance(paths, (list, tuple)):
        # Relative plugin paths in a file mean "next to this file", not the cwd.
        section["plugin_paths"] = [p if not isinstance(p, str) or Path(p).is_absolute()
                                   else str(base / p) for p in paths]
    return section


def configured_engine_name(config: ConfigArg = None) -> str:
    """The ``context.engine`` value of ``config`` (default ``"compressor"``)."""
    name = context_section(config).get("engine", DEFAULT_ENGINE)
    if name is None:
        return DEFAULT_ENGINE
    if not isinstance(name, str) or not name.strip():
        raise InvalidValue(f"context.engine must be a non-empty string, got {name!r}")
    return name.strip()


def search_paths(given: Iterable[PathArg] | None, section: Mapping[str, Any]) -> list[Path]:
    """``given`` (default: the current directory and ``~/.lionctx``), then the section's
    ``plugin_paths``."""
    if given is not None and isinstance(given, (str, PathLike)):
        raise InvalidType(f"search_paths must be a list of paths, got the single path {given!r}")
    paths = ([Path(p) for p in given] if given is not None
             else [Path.cwd(), Path.home() / ".lionctx"])
    extra = section.get("plugin_paths") or []
    if isinstance(extra, (str, PathLike)):
        extra = [extra]
    if not isinstance(extra, (list, tuple)):
        raise InvalidValue(f"context.plugin_paths must be a list of paths, got {extra!r}")
    return paths + [Path(p) for p in extra]

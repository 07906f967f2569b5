"""Engine configuration (``engines/_config.py``) and plugin discovery (``_loader.py``):
examples, and properties over generated configurations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionctx.engines import _config
from lionctx.engines import _loader as loader

keys = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
scalars = st.one_of(st.integers(-10**6, 10**6), st.booleans(),
                    st.text(alphabet="abc xyz-_./:#'\"\\é", max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(scalars, max_size=3), st.dictionaries(keys, inner, max_size=3)), max_leaves=8)
configs = st.dictionaries(keys, values, max_size=4)


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"


def to_toml(config: dict) -> str:
    return "".join(f"{k} = {toml_value(v)}\n" for k, v in config.items())


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(configs)
def test_yaml_and_toml_files_read_as_the_same_mapping(tmp_path, config):
    as_yaml = tmp_path / "c.yaml"
    as_toml = tmp_path / "c.toml"
    as_yaml.write_text(yaml.safe_dump(config), encoding="utf-8")
    as_toml.write_text(to_toml(config), encoding="utf-8")
    assert _config.load_config(as_yaml) == config
    assert _config.load_config(as_toml) == config
    assert _config.load_toml(to_toml(config).encode()) == config


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(st.lists(st.one_of(st.from_regex(r"[a-z]{1,6}(/[a-z]{1,6}){0,2}", fullmatch=True),
                          st.just("/abs/plugins")), max_size=4))
def test_relative_plugin_paths_in_a_file_are_next_to_the_file(tmp_path, paths):
    file = tmp_path / "sub" / "c.toml"
    file.parent.mkdir(exist_ok=True)
    file.write_text(to_toml({"context": {"plugin_paths": paths}}))
    section = _config.context_section(file)
    assert section["plugin_paths"] == [
        p if Path(p).is_absolute() else str(file.parent / p) for p in paths]
    # a mapping has no file to be next to: its paths are kept as given
    assert _config.context_section({"context": {"plugin_paths": paths}})["plugin_paths"] == paths


@given(st.text(max_size=12))
def test_the_engine_name_is_stripped_or_refused(name):
    config = {"context": {"engine": name}}
    if name.strip():
        assert _config.configured_engine_name(config) == name.strip()
    else:
        with pytest.raises(ValueError, match="non-empty string"):
            _config.configured_engine_name(config)


def test_defaults_and_bad_shapes():
    assert _config.configured_engine_name(None) == "compressor"
    assert _config.configured_engine_name({"context": {"engine": None}}) == "compressor"
    with pytest.raises(TypeError, match="config must be a mapping"):
        _config.context_section(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'context' must be a mapping"):
        _config.context_section({"context": [1]})
    with pytest.raises(TypeError, match="single path"):
        _config.search_paths("plugins", {})
    with pytest.raises(ValueError, match="plugin_paths must be a list"):
        _config.search_paths([], {"plugin_paths": 3})
    assert _config.search_paths(["a"], {"plugin_paths": "b"}) == [Path("a"), Path("b")]


@pytest.mark.parametrize("raw, match", [(b"budget = \n", "not valid TOML"),
                                        (b"x = '\xff'\n", "not valid TOML")])
def test_a_broken_toml_file_names_itself(tmp_path, raw, match):
    file = tmp_path / "c.toml"
    file.write_bytes(raw)
    with pytest.raises(ValueError, match=match) as info:
        _config.load_config(file)
    assert str(file) in str(info.value)


def test_one_toml_reader_for_the_loader_and_the_cli(tmp_path, monkeypatch):
    from lionctx.cli import UsageError
    from lionctx.cli._sources import read_config

    file = tmp_path / "c.toml"
    file.write_text("budget = 1\n")
    monkeypatch.setitem(sys.modules, "tomllib", None)  # Python 3.10 without tomli
    monkeypatch.setitem(sys.modules, "tomli", None)
    with pytest.raises(ImportError, match=r"Python 3\.11\+ or the 'tomli' package"):
        _config.load_toml(b"budget = 1\n")
    with pytest.raises(ImportError, match=r"c\.toml.*Python 3\.11\+ or the 'tomli'"):
        loader.load_config(file)
    with pytest.raises(UsageError, match=r"Python 3\.11\+ or the 'tomli' package"):
        read_config(file)


def test_the_loader_still_exports_its_configuration_names():
    assert loader.load_config is _config.load_config
    assert loader.configured_engine_name is _config.configured_engine_name
    assert loader.DEFAULT_ENGINE == "compressor"
    assert loader.ENTRY_POINT_GROUP == "lionctx.context_engines"


# -- discovery -----------------------------------------------------------------------------

plain = st.from_regex(r"[a-z][a-z0-9 _-]{0,10}[a-z0-9]", fullmatch=True).filter(
    lambda v: not isinstance(yaml.safe_load(v), (bool, int, float, type(None))))


# Keys pyyaml reads as something else (YAML 1.1's ``no``, ``on``, ``y`` are booleans) are
# not plugin metadata keys; the flat reader keeps every key a string.
keys = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True).filter(
    lambda k: isinstance(yaml.safe_load(k), str))


@given(st.dictionaries(keys, plain,
                       min_size=1, max_size=5), st.booleans())
def test_the_flat_metadata_reader_agrees_with_pyyaml(meta, quoted):
    lines = [f"{k}: {json.dumps(v) if quoted else v}" for k, v in meta.items()]
    text = "# plugin\n" + "\n".join(lines) + "\n"
    assert loader._parse_flat_yaml(text) == yaml.safe_load(text) == meta


def test_plugin_directories_are_found_in_order_and_named(tmp_path):
    root = tmp_path / "plugins" / "context_engine"
    for name in ["b", "a", "_private", ".hidden", "no_init"]:
        (root / name).mkdir(parents=True)
        if name != "no_init":
            (root / name / "__init__.py").write_text("")
    (root / "b" / "plugin.yaml").write_text("name: bee\n")
    found = loader.plugin_dirs([tmp_path])
    assert [d.name for d in found] == ["a", "b"]
    assert [loader.plugin_name(d, loader.plugin_meta(d)) for d in found] == ["a", "bee"]
    assert loader.plugin_dirs([root]) == found  # a context_engine folder itself


def test_there_is_one_bridge():
    import lionctx.engines
    from lionctx.engines import _session

    class AsyncOnly:
        async def complete(self, messages):
            return None

    engine_modules = [m for name, m in sys.modules.items() if name.startswith("lionctx.engines.")]
    assert [m.__name__ for m in engine_modules if hasattr(m, "ThreadBridgeModel")] == [
        "lionctx.engines._session"] and not hasattr(lionctx.engines, "summary_model")
    assert type(_session.summary_model(AsyncOnly())) is _session.ThreadBridgeModel

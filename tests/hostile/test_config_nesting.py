"""Attack: configuration files nested thousands of levels deep, or very large.

``lionctx resolve --config`` on a TOML value nested 5,000 deep printed a RecursionError
traceback. Now every configuration reader (the CLI's ``--config`` and the engine
configuration, TOML and YAML) bounds the size it reads and the depth it accepts, and
the CLI says so in one line, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from lionctx import InvalidValue
from lionctx.engines import load_config
from lionctx.engines._config import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, load_toml

from ..cli.helpers import run_cli

DEEP_ARRAY = "x = " + "[" * 5_000 + "]" * 5_000 + "\n"
DEEP_INLINE = "x = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n"
DEEP_TABLE = "[" + ".".join(["t"] * 5_000) + "]\nb = 1\n"


def assert_one_clean_line(out, *expected: str) -> None:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "RecursionError" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("lionctx resolve: error: --config ")
    for part in expected:
        assert part in lines[0]


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_INLINE], ids=["array", "inline-table"])
def test_resolve_on_toml_nested_five_thousand_deep_is_one_clean_line(tmp_path: Path, text):
    config = tmp_path / "deep.toml"
    config.write_text(text)
    out = run_cli("resolve", "--config", str(config))
    assert_one_clean_line(out, f"more than {MAX_CONFIG_DEPTH} levels deep")
    assert out.stdout == ""


def test_resolve_on_a_config_over_the_size_limit_is_one_clean_line(tmp_path: Path):
    config = tmp_path / "big.toml"
    config.write_text("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    out = run_cli("resolve", "--config", str(config))
    assert_one_clean_line(out, f"over {MAX_CONFIG_BYTES} bytes")


# -- the same guarantee, attacked from other sides -------------------------------------------

def test_a_dotted_table_header_five_thousand_deep_is_refused(tmp_path: Path):
    # A table header nests without recursion in the parser: the data it builds is
    # what is too deep (and would break whatever walks it recursively later).
    config = tmp_path / "dotted.toml"
    config.write_text(DEEP_TABLE)
    out = run_cli("resolve", "--config", str(config))
    assert_one_clean_line(out, f"more than {MAX_CONFIG_DEPTH} levels deep")


def test_nesting_just_within_the_limit_is_read():
    depth = MAX_CONFIG_DEPTH - 1  # the top-level table is one level
    data = load_toml(("x = " + "[" * depth + "]" * depth).encode())
    value = data["x"]
    for _ in range(depth - 1):
        (value,) = value
    assert value == []


def test_one_level_past_the_limit_is_refused():
    depth = MAX_CONFIG_DEPTH
    with pytest.raises(InvalidValue, match="levels deep"):
        load_toml(("x = " + "[" * depth + "]" * depth).encode())


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_INLINE, DEEP_TABLE])
def test_engine_toml_config_nested_deep_is_an_invalid_value(tmp_path: Path, text):
    config = tmp_path / "engine.toml"
    config.write_text(text)
    with pytest.raises(InvalidValue, match="levels deep"):
        load_config(config)


def test_engine_yaml_config_nested_deep_is_an_invalid_value(tmp_path: Path):
    pytest.importorskip("yaml")
    config = tmp_path / "engine.yaml"
    config.write_text("x: " + "[" * 5_000 + "]" * 5_000 + "\n")
    with pytest.raises(InvalidValue, match="levels deep"):
        load_config(config)
    config.write_text("".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n")
    with pytest.raises(InvalidValue, match="levels deep"):
        load_config(config)


def test_engine_config_over_the_size_limit_is_refused_before_parsing(tmp_path: Path):
    config = tmp_path / "big.yaml"
    config.write_text("a: 1\n" + "#" * MAX_CONFIG_BYTES)
    with pytest.raises(InvalidValue, match=f"over {MAX_CONFIG_BYTES} bytes"):
        load_config(config)

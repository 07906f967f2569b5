"""The public surface: what the package ``__init__``s export, and nothing else.

Implementation modules are private (``lionctx._gather`` ...). Each public package lists
its API in ``__all__``, ``dir()`` shows exactly that, and the test suite itself imports
only the public API plus the one documented testing module, :mod:`lionctx.testing`.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib
import pkgutil

import lionctx
import lionctx.integrations
import pytest

PACKAGES = ["lionctx", "agentium_compat", "lionctx.providers", "lionctx.engines",
            "lionctx.cache", "lionctx.models", "lionctx.testing", "lionctx.cli", "lionctx.demo",
            "lionctx.integrations"]
# Public modules that are not packages: the LionAGI face, the agentium entry points,
# telemetry, and one module per host framework (each an optional extra).
MODULES = ["lionctx.branch", "lionctx.registry", "lionctx.resolve", "lionctx.telemetry"] + [
    f"lionctx.integrations.{m.name}" for m in pkgutil.iter_modules(lionctx.integrations.__path__)
    if not m.name.startswith("_")]
PUBLIC = set(PACKAGES) | set(MODULES)
ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", PACKAGES)
def test_dir_shows_exactly_all(name: str) -> None:
    package = importlib.import_module(name)
    for sub in pkgutil.iter_modules(getattr(package, "__path__", [])):
        importlib.import_module(f"{name}.{sub.name}")  # a loaded submodule must not show
    shown = [n for n in dir(package) if not (n.startswith("__") and n.endswith("__"))]
    assert shown == sorted(package.__all__)


@pytest.mark.parametrize("name", PACKAGES + MODULES)
def test_every_exported_name_resolves(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # pragma: no cover - an optional host missing
        pytest.skip(f"optional extra not installed: {exc}")
    for attr in module.__all__:
        assert getattr(module, attr) is not None, (name, attr)


def _implementation_modules() -> list[str]:  # dotted names of lionctx and agentium_compat modules
    found = []
    for path in [*(ROOT / "lionctx").rglob("*.py"), *(ROOT / "agentium_compat").rglob("*.py")]:
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" or parts[-1] == "__main__":
            continue
        found.append(".".join(parts))
    return found


def test_implementation_modules_are_private() -> None:
    public_files = {m for m in MODULES}
    leaky = [m for m in _implementation_modules()
             if m not in public_files and not any(p.startswith("_") for p in m.split(".")[1:])]
    assert leaky == []


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ImportError:  # the parent is not a package
        return False


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, node.module)]
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                    if _is_module(f"{node.module}.{a.name}")]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, m) for line, m in out if m.split(".")[0] in ("lionctx", "agentium_compat")]


def test_examples_import_only_the_public_api() -> None:
    # Examples are what users copy: public names only. Tests import internals openly
    # (``from lionctx._gather import ...``), as httpx's own tests do.
    bad = []
    for path in sorted((ROOT / "examples").rglob("*.py")):
        for line, module in _imports(path):
            if module not in PUBLIC:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert bad == []


# agentium_compat is a face built on lionctx from outside: the public API plus these
# documented extension modules, each import of one commented where it is made.
EXTENSIONS = {"lionctx._face", "lionctx._suggest", "lionctx.providers._redact"}


def test_agentium_compat_builds_on_the_public_api_and_the_documented_extensions() -> None:
    bad, used = [], set()
    for path in sorted((ROOT / "agentium_compat").rglob("*.py")):
        lines = path.read_text().splitlines()
        for line, module in _imports(path):
            if module.split(".")[0] != "lionctx" or module in PUBLIC:
                continue
            used.add(module)
            if module not in EXTENSIONS:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
            elif "extension" not in lines[line - 1]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module} (uncommented)")
    assert bad == []
    assert used == EXTENSIONS  # each documented extension is one that is used


def _absolute_imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, relative imports resolved (lazy ones included)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] \
                if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            out += [(node.lineno, module)]
            out += [(node.lineno, f"{module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


def test_the_core_never_imports_a_face_or_an_edge_built_on_it() -> None:
    # The core may not reach up into a host integration, the CLI, the demo or the
    # agentium port: each of those is built on the core.
    upward = ("agentium_compat", "lionctx.integrations", "lionctx.cli", "lionctx.demo")
    bad = []
    for path in sorted((ROOT / "lionctx").rglob("*.py")):
        if path.relative_to(ROOT).parts[1] in ("integrations", "cli", "demo", "__main__.py"):
            continue
        for line, module in _absolute_imports(path):
            if module.startswith(upward):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert bad == []


def test_the_testing_module_keeps_what_users_need() -> None:
    import lionctx.testing as testing

    assert len(testing.__all__) <= 12
    assert testing.LocalRedisServer.__name__ == "LocalRedisServer"
    with pytest.raises(AttributeError):
        testing.gather  # type: ignore[attr-defined]  # noqa: B018  (internals: from their modules)


def test_engines_export_the_plugin_contract_only() -> None:
    import lionctx.engines as engines

    hooks = {"apply_select_context", "apply_select_context_async", "after_response",
             "maybe_compress", "notify_turn_complete", "dispatch_engine_tool", "engine_tools"}
    assert not hooks & set(engines.__all__)
    assert {"ContextEngine", "ContextCompressor", "PluginContext",
            "register_context_engine"} <= set(engines.__all__)


def test_loggers_have_public_names() -> None:
    # What users configure is a logger name: private module paths never show in one.
    import logging

    names = []
    for module_name in _implementation_modules():
        module = importlib.import_module(module_name)
        log = getattr(module, "logger", None)
        if isinstance(log, logging.Logger):
            names.append(log.name)
    assert "lionctx.gather" in names and "lionctx.engines.host" in names
    assert [n for n in names if "._" in n or not n.startswith(("lionctx", "agentium"))] == []


@pytest.mark.parametrize("name", PACKAGES + MODULES)
def test_public_names_report_a_public_module(name: str) -> None:
    # As httpx does: ``lionctx.Report``, never ``lionctx._report.Report``.
    module = importlib.import_module(name)
    private = []
    for attr in module.__all__:
        where = getattr(getattr(module, attr), "__module__", None)
        if isinstance(where, str) and where.startswith(("lionctx", "agentium_compat")) and any(
                part.startswith("_") for part in where.split(".")):
            private.append(f"{attr}: {where}")
    assert private == []


def test_the_top_level_keeps_what_users_call() -> None:
    assert len(lionctx.__all__) <= 45
    internals = {"admit", "Admission", "Candidate", "ProviderCall", "escape_name",
                 "neutralize", "tag_block", "render_lionagi", "coerce_run_context"}
    assert not internals & set(lionctx.__all__)
    for name in internals:
        with pytest.raises(AttributeError):
            getattr(lionctx, name)

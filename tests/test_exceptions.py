"""One exception root: everything lionctx raises is a ``LionctxError``.

The walk imports every module of lionctx and agentium_compat and finds every
exception class they define, so a new exception on the wrong base fails here. The
validator tests pin that a value refused at the API boundary is a ``LionctxError``
*and* the built-in (``ValueError``/``TypeError``) callers caught before.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable
from types import ModuleType
from typing import Any

import agentium_compat
import lionctx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, LionctxError, resolve_context

# Internal control flow that never leaves its module (caught where it is raised).
_INTERNAL = {"_Abandoned", "_NotPlain"}

_PACKAGES = ("lionctx", "agentium_compat")


def _modules() -> list[ModuleType]:
    found = []
    for package in (lionctx, agentium_compat):
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            found.append(importlib.import_module(info.name))
    return found


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in lionctx or agentium_compat, by qualified name."""
    classes: dict[str, type[BaseException]] = {}
    for module in _modules():
        for value in vars(module).values():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__.split(".")[0] in _PACKAGES):
                classes[f"{value.__module__}.{value.__qualname__}"] = value
    return classes


def test_the_walk_finds_the_known_exceptions() -> None:
    names = {cls.__name__ for cls in _exception_classes().values()}
    # the eleven the issue counted, and the ones added with the root
    assert {"SourceUnavailable", "WorkersExhausted", "HttpFetchError", "SharedFetchError",
            "SharedCacheError", "DecodeError", "BodyTooLarge", "PluginLoadError",
            "ModelError", "ModelAuthError", "TokenizerDataError", "UsageError",
            "InvalidValue", "InvalidType", "ConfigurationError", "LionctxError"} <= names


def test_every_exception_lionctx_defines_is_a_lionctx_error() -> None:
    strays = sorted(name for name, cls in _exception_classes().items()
                    if not issubclass(cls, LionctxError) and cls.__name__ not in _INTERNAL)
    assert strays == []


def test_every_exception_lives_in_the_exceptions_module() -> None:
    # Public classes report ``lionctx`` as their module; where they are defined is
    # the exceptions module's own namespace.
    from lionctx import _exceptions

    elsewhere = sorted(name for name, cls in _exception_classes().items()
                       if vars(_exceptions).get(cls.__name__) is not cls
                       and cls.__name__ not in _INTERNAL | {"_Garbage"})
    assert elsewhere == []


def test_every_public_exception_is_exported_from_the_package() -> None:
    public = {cls for cls in _exception_classes().values() if not cls.__name__.startswith("_")}
    for cls in public:
        assert getattr(lionctx, cls.__name__) is cls
        assert cls.__name__ in lionctx.__all__


# The built-in base each class had before the root existed: callers still catch it.
_KEPT_BASES: dict[str, type[Exception]] = {
    "TokenizerDataError": RuntimeError,
    "PluginLoadError": RuntimeError,
    "ModelError": RuntimeError,
    "ModelConfigError": RuntimeError,
    "ModelConnectionError": RuntimeError,
    "ModelResponseError": RuntimeError,
    "ModelAuthError": RuntimeError,
    "InvalidValue": ValueError,
    "InvalidType": TypeError,
}


@pytest.mark.parametrize("name, builtin", sorted(_KEPT_BASES.items()))
def test_the_builtin_base_is_kept(name: str, builtin: type[Exception]) -> None:
    assert issubclass(getattr(lionctx, name), builtin)


def test_a_type_error_is_not_a_value_error() -> None:
    # ConfigurationError carries no built-in base, so neither leaks into the other.
    assert not issubclass(lionctx.InvalidType, ValueError)
    assert not issubclass(lionctx.InvalidValue, TypeError)
    assert not issubclass(lionctx.UsageError, (ValueError, TypeError))


def test_source_failures_keep_their_chain() -> None:
    assert issubclass(lionctx.WorkersExhausted, lionctx.SourceUnavailable)
    assert issubclass(lionctx.HttpFetchError, lionctx.SourceUnavailable)
    assert not issubclass(lionctx.SharedFetchError, lionctx.SourceUnavailable)
    assert issubclass(lionctx.ModelAuthError, lionctx.ModelResponseError)
    assert lionctx.ModelResponseError("no", status_code=503).status_code == 503
    inner = KeyError("k")
    shared = lionctx.SharedFetchError(inner)
    assert shared.original is inner and str(shared) == "KeyError: 'k'"


@pytest.mark.parametrize("module, name", [
    ("lionctx._outcome", "SourceUnavailable"),
    ("lionctx.providers", "SourceUnavailable"),
    ("lionctx.providers._base", "SourceUnavailable"),
    ("lionctx._threads", "WorkersExhausted"),
    ("lionctx.providers._http", "HttpFetchError"),
    ("lionctx.providers", "SharedFetchError"),
    ("lionctx.providers._cache", "SharedFetchError"),
    ("lionctx.providers._decode", "DecodeError"),
    ("lionctx.providers._decode", "BodyTooLarge"),
    ("lionctx.cache._redis_cache", "SharedCacheError"),
    ("lionctx.engines", "PluginLoadError"),
    ("lionctx.engines._loader", "PluginLoadError"),
    ("lionctx.models", "ModelError"),
    ("lionctx.models", "ModelAuthError"),
    ("lionctx._tokens", "TokenizerDataError"),
    ("lionctx.cli._sources", "UsageError"),
    ("agentium_compat", "SourceUnavailable"),
])
def test_old_import_paths_still_work(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(lionctx, name)


# -- the boundary validators ----------------------------------------------------------


def _set(attr: str, value: Any) -> Callable[[], None]:
    def run() -> None:
        setattr(ContextProviderRegistry(), attr, value)
    return run


def _resolve(*args: Any) -> Callable[[], None]:
    def run() -> None:
        import anyio
        anyio.run(lambda: resolve_context(*args))
    return run


def _validators() -> list[Any]:
    from lionctx._policy import (
        check_counter,
        check_limit,
        check_number,
        check_observer,
    )
    from lionctx._policy import (
        check_max_chars as validate_max_chars,
    )
    from lionctx._policy import (
        check_seconds as validate_seconds,
    )
    from lionctx._threads import set_max_threads
    from lionctx.providers._base import check_count, check_duration, check_name, check_path

    reg = ContextProviderRegistry
    cases: list[tuple[str, Callable[[], Any], type[Exception]]] = [
        ("validate_seconds type", lambda: validate_seconds("1", "timeout"), TypeError),
        ("validate_seconds value", lambda: validate_seconds(-1, "timeout"), ValueError),
        ("validate_max_chars type", lambda: validate_max_chars(1.5), TypeError),
        ("validate_max_chars value", lambda: validate_max_chars(0), ValueError),
        ("check_limit type", lambda: check_limit("2"), TypeError),
        ("check_limit value", lambda: check_limit(0), ValueError),
        ("check_number", lambda: check_number(math.nan, "budget", allow_none=False), TypeError),
        ("check_counter", lambda: check_counter(3), TypeError),
        ("check_observer", lambda: check_observer("print"), TypeError),
        ("register(priority=None)", lambda: reg().register(lambda **_: "x", priority=None),  # type: ignore[arg-type]
         TypeError),
        ("register(name=1)", lambda: reg().register(lambda **_: "x", name=1), TypeError),  # type: ignore[arg-type]
        ("register(timeout=0)", lambda: reg().register(lambda **_: "x", timeout=0), ValueError),
        ("registry(counter=5)", lambda: reg(counter=5), TypeError),  # type: ignore[arg-type]
        ("registry.budget = None", _set("budget", None), TypeError),
        ("registry.timeout = -1", _set("timeout", -1), ValueError),
        ("registry.deadline = inf", _set("deadline", math.inf), ValueError),
        ("registry.limit = 0", _set("limit", 0), ValueError),
        ("registry.max_chars = True", _set("max_chars", True), TypeError),
        ("resolve_context(providers='p')", _resolve("p", "q"), TypeError),
        ("resolve_context(query=1)", _resolve([], 1), TypeError),
        ("check_name", lambda: check_name(""), ValueError),
        ("check_count type", lambda: check_count(1.0, "n", 1), TypeError),
        ("check_count value", lambda: check_count(0, "n", 1), ValueError),
        ("check_duration type", lambda: check_duration("1", "t", allow_zero=False), TypeError),
        ("check_duration value", lambda: check_duration(0, "t", allow_zero=False), ValueError),
        ("check_path type", lambda: check_path(1, "base"), TypeError),
        ("check_path value", lambda: check_path("a\x00b", "base"), ValueError),
        ("set_max_threads", lambda: set_max_threads(0), ValueError),
        ("count_tokens(1)", lambda: lionctx.count_tokens(1), TypeError),  # type: ignore[arg-type]
        ("count_tokens(encoding=5)", lambda: lionctx.count_tokens("x", 5), TypeError),  # type: ignore[arg-type]
    ]
    return [pytest.param(call, builtin, id=label) for label, call, builtin in cases]


@pytest.mark.parametrize("call, builtin", _validators())
def test_a_refused_value_is_a_lionctx_error_and_its_old_builtin(
        call: Callable[[], Any], builtin: type[Exception]) -> None:
    with pytest.raises(builtin) as caught:
        call()
    assert isinstance(caught.value, lionctx.ConfigurationError)
    assert isinstance(caught.value, LionctxError)


_ANY = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3),
                 st.lists(st.integers(), max_size=2))


@given(_ANY)
def test_a_registry_setting_is_kept_or_refused_as_a_lionctx_error(value: Any) -> None:
    """Whatever is assigned, the setter keeps it or raises a ConfigurationError that is
    also a ValueError or TypeError (never a bare built-in, never something else)."""
    registry = ContextProviderRegistry()
    for attr in ("timeout", "deadline", "limit", "max_chars", "budget"):
        try:
            setattr(registry, attr, value)
        except LionctxError as exc:
            assert isinstance(exc, lionctx.ConfigurationError)
            assert isinstance(exc, (ValueError, TypeError))


def _refusals():
    from agentium_compat import Agent
    from lionctx import (
        Branch,
        ContextProviderRegistry,
        FilesystemContextProvider,
        ProviderReport,
        Resolution,
    )
    from lionctx.models._openai_chat import request_body

    return [
        ("Branch(5)", lambda: Branch(5)),
        ("Branch(render='x')", lambda: Branch("s", render="x")),
        ("Agent(name='')", lambda: Agent(name="")),
        ("Agent(max_sessions=0)", lambda: Agent(name="a", max_sessions=0)),
        ("Agent(context_providers='x')", lambda: Agent(name="a", context_providers="x")),
        ("register(priority=None)",
         lambda: ContextProviderRegistry().register(object(), priority=None)),
        ("FilesystemContextProvider(max_files=0)",
         lambda: FilesystemContextProvider(".", max_files=0)),
        ("ProviderReport(report=5)", lambda: ProviderReport(report=5)),
        ("Resolution(5)", lambda: Resolution(5)),
        ("request_body(messages='hello')", lambda: request_body("m", {}, "hello", None, {})),
    ]


@pytest.mark.parametrize("case", range(len(_refusals())))
def test_a_refusal_at_the_boundary_is_one_lionctx_error(case):
    # One ``except LionctxError`` catches every refusal, and the built-in base too.
    label, build = _refusals()[case]
    with pytest.raises(LionctxError) as info:
        build()
    assert isinstance(info.value, (ValueError, TypeError)), label

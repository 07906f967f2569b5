"""Tools for ``Branch.operate``: a callable, a :class:`Tool` or an OpenAI function-tool
spec; a spec without a function is offered to the model, and a call to it handed back.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from .._exceptions import InvalidType, InvalidValue
from .._log import logger_for
from .._safe_text import error_text

__all__ = ["ActionResponse", "Tool", "as_tool", "parse_arguments", "run_tool_call"]

logger = logger_for(__name__)

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean",
           list: "array", tuple: "array", set: "array", dict: "object"}


def _schema(tp: Any) -> dict[str, Any]:
    """A JSON-schema fragment for a type hint; ``{}`` (anything) when unknown."""
    if tp is inspect.Parameter.empty or tp is Any:
        return {}
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        inner = [a for a in args if a is not type(None)]
        return _schema(inner[0]) if len(inner) == 1 else {}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset):
        item = _schema(args[0]) if args and args[0] is not Ellipsis else {}
        return {"type": "array", "items": item} if item else {"type": "array"}
    if origin in (dict, Mapping):
        return {"type": "object"}
    return {}


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidValue(
            f"tool name must be 1-64 characters of letters, digits, '_' or '-', got {name!r}")
    return name


@dataclass
class Tool:
    """One tool: name, description, JSON-schema parameters and implementation (``None``:
    only described to the model, and a call to it returned to the caller)."""

    name: str
    function: Callable[..., Any] | None = None
    description: str = ""
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}})

    def __post_init__(self) -> None:
        _check_name(self.name)
        if self.function is not None and not callable(self.function):
            raise InvalidType(f"tool {self.name!r}: function must be callable, "
                            f"got {type(self.function).__name__}")
        if not isinstance(self.parameters, Mapping):
            raise InvalidType(f"tool {self.name!r}: parameters must be a JSON-schema dict, "
                            f"got {type(self.parameters).__name__}")

    def spec(self) -> dict[str, Any]:
        """The OpenAI function-tool spec sent to the model."""
        fn: dict[str, Any] = {"name": self.name, "parameters": dict(self.parameters)}
        if self.description:
            fn["description"] = self.description
        return {"type": "function", "function": fn}

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None) -> Tool:
        """Build a tool from a callable's signature, type hints and docstring."""
        if not callable(fn):
            raise InvalidType(f"a tool must be callable, got {type(fn).__name__}: {fn!r}")
        tool_name = name or getattr(fn, "__name__", None) or type(fn).__name__
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # unresolvable forward references: fall back to no types
            hints = {}
        props: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            props[pname] = _schema(hints.get(pname, param.annotation))
            if param.default is param.empty:
                required.append(pname)
        params: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            params["required"] = required
        if description is None:
            description = (inspect.getdoc(fn) or "").split("\n\n", 1)[0].strip()
        return cls(tool_name, fn, description, params)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any],
                  function: Callable[..., Any] | None = None) -> Tool:
        """Build a tool from an OpenAI function-tool spec (or its ``function`` part)."""
        if not isinstance(spec, Mapping):
            raise InvalidType(f"a tool spec must be a dict, got {type(spec).__name__}")
        body = spec.get("function", spec) if spec.get("type", "function") == "function" else None
        if not isinstance(body, Mapping):
            raise InvalidValue(f"unsupported tool spec (only function tools): {dict(spec)!r}")
        params = body.get("parameters") or {"type": "object", "properties": {}}
        name = _check_name(body.get("name"))
        return cls(name, function, body.get("description") or "", dict(params))


def as_tool(obj: Any) -> Tool:
    """A :class:`Tool` from a callable, a Tool, or a spec dict."""
    if isinstance(obj, Tool):
        return obj
    if isinstance(obj, Mapping):
        return Tool.from_spec(obj)
    if callable(obj):
        return Tool.from_function(obj)
    raise InvalidType(f"a tool must be a callable, a Tool or a spec dict, got "
                    f"{type(obj).__name__}: {obj!r}")


@dataclass
class ActionResponse:
    """The result of running one tool call."""

    tool_call_id: str
    function: str
    arguments: dict[str, Any]
    output: Any = None
    error: str | None = None
    """``"ExceptionType: message"`` when the tool raised."""

    @property
    def content(self) -> str:
        """The tool message content the model sees."""
        if self.error is not None:
            return f"error: {self.error}"
        if isinstance(self.output, str):
            return self.output
        try:
            return json.dumps(self.output, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return str(self.output)


def parse_arguments(raw: Any) -> Any:
    """A tool call's arguments: ``{}`` for none (``None`` or ``""``), the model's JSON
    text parsed (ValueError or RecursionError when it is not JSON), else the value itself
    (so ``[]`` or ``0`` reach the caller's "must be a JSON object")."""
    if raw is None or raw == "":
        return {}
    return json.loads(raw) if isinstance(raw, str) else raw


async def run_tool_call(tool: Tool | None, call: Mapping[str, Any]) -> tuple[
        ActionResponse | None, str]:
    """Run one OpenAI-format tool call: (its response, the tool message text). The
    response is None when the call could not be run (unknown tool, arguments not a JSON
    object or not fitting); a tool that raises gives a response with ``error``.
    """
    fn_part = call.get("function") or {}
    name = fn_part.get("name")
    call_id = call.get("id") or ""
    if tool is None or tool.function is None:
        return None, f"error: unknown tool {name!r}"
    if not isinstance(name, str):
        # A call without a function name, run with the tool the caller chose: the
        # response names that tool (it is the function that ran).
        name = tool.name
    raw = fn_part.get("arguments")
    try:
        args = parse_arguments(raw)
    except (ValueError, RecursionError) as exc:  # the model's text: any shape, any depth
        detail = exc if isinstance(exc, ValueError) else "nested too deeply"
        return None, f"error: arguments for {name!r} are not valid JSON ({detail})"
    if not isinstance(args, dict):
        return None, f"error: arguments for {name!r} must be a JSON object, got {raw!r}"
    try:
        inspect.signature(tool.function).bind(**args)
    except TypeError as exc:
        return None, f"error: arguments do not fit {name!r}: {exc}"
    except ValueError:  # no introspectable signature: let the call decide
        pass
    try:
        result = tool.function(**args)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:
        logger.warning("tool %r raised; the model is told", name, exc_info=True)
        resp = ActionResponse(call_id, name, args, None, ": ".join(error_text(exc)))
    else:
        resp = ActionResponse(call_id, name, args, result)
    return resp, resp.content

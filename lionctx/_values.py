"""The value types of one turn: :class:`Instruction`, :class:`ContextBlock`,
:class:`OperateResult`. Public through :mod:`lionctx` and :mod:`lionctx.branch`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._exceptions import InvalidType, InvalidValue
from .models._base import ChatResponse
from .models._tools import ActionResponse, Tool, as_tool

__all__ = ["ContextBlock", "Instruction", "OperateResult", "RenderMode", "add_usage",
           "as_block", "as_instruction", "tools_by_name"]

RenderMode = Literal["tags", "lionagi"]
RENDER_MODES: tuple[RenderMode, ...] = ("tags", "lionagi")


@dataclass(frozen=True)
class ContextBlock:
    """One selected provider block: the provider's name and its raw text."""

    name: str
    text: str


@dataclass
class Instruction:
    """What the user asks in one turn. Providers receive this object.

    ``instruction`` is the user's text (what fetch-style providers get as their
    query); ``guidance`` optional steering text that precedes it.
    """

    instruction: str
    guidance: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.instruction, str):
            raise InvalidType(f"instruction must be a str, got {type(self.instruction).__name__}")
        if self.guidance is not None and not isinstance(self.guidance, str):
            raise InvalidType(f"guidance must be a str or None, got {type(self.guidance).__name__}")

    @property
    def content(self) -> str:
        """The stored user text: ``guidance + "\\n\\n" + instruction``, or the instruction."""
        return f"{self.guidance}\n\n{self.instruction}" if self.guidance else self.instruction

    def to_message(self) -> dict[str, Any]:
        """A new user message dict for this instruction."""
        return {"role": "user", "content": self.content}


@dataclass
class OperateResult:
    """What :meth:`Branch.operate` did.

    ``output`` is the final reply (``None`` when the round limit stopped the loop);
    ``action_responses`` has one entry per tool call (``None``: it could not run);
    ``usage`` sums the numeric usage of every round.
    """

    output: str | None
    response: ChatResponse
    action_responses: list[ActionResponse | None] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    rounds: int = 0
    stopped: Literal["done", "max_rounds"] = "done"


def as_instruction(instruction: str | Instruction, guidance: str | None) -> Instruction:
    """``instruction`` as an :class:`Instruction` (``guidance`` wins when given)."""
    if isinstance(instruction, Instruction):
        return instruction if guidance is None else Instruction(instruction.instruction, guidance)
    if not isinstance(instruction, str):
        raise InvalidType(f"instruction must be a str or an Instruction, got "
                          f"{type(instruction).__name__}")
    return Instruction(instruction, guidance)


def as_block(block: Any) -> ContextBlock:
    """A :class:`ContextBlock`, a str (named ``context``) or a ``(name, text)`` tuple."""
    if isinstance(block, ContextBlock):
        return block
    if isinstance(block, str):
        return ContextBlock("context", block)
    if isinstance(block, tuple) and len(block) == 2 and all(isinstance(x, str) for x in block):
        return ContextBlock(block[0], block[1])
    raise InvalidType(f"a context block must be a ContextBlock, a str or a (name, text) "
                    f"tuple, got {block!r}")


def add_usage(total: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """``total`` plus the integer counts of ``usage`` (a new dict; None while empty)."""
    if not usage:
        return total
    out = dict(total or {})
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = out.get(key, 0) + value
    return out


def tools_by_name(tools: Sequence[Any]) -> dict[str, Tool]:
    """``operate``'s ``tools`` (callables, :class:`Tool` objects, specs) by name."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidType(f"tools must be a list of callables, Tools or specs, got {tools!r}")
    by_name: dict[str, Tool] = {}
    for obj in tools:
        if (tool := as_tool(obj)).name in by_name:
            raise InvalidValue(f"two tools are named {tool.name!r}")
        by_name[tool.name] = tool
    return by_name

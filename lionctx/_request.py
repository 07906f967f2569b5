"""The messages one model call sends, built from a conversation (``Branch`` and
``Agent`` alike). Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._messages import message_text, strip_persistence_fields, system_message
from ._render import kept_in_order, render_lionagi, render_tagged
from ._values import ContextBlock, Instruction, RenderMode

if TYPE_CHECKING:  # pragma: no cover
    from .registry import ProviderReport

__all__ = ["build_request", "selected_blocks"]


def selected_blocks(report: ProviderReport, render: RenderMode) -> tuple[ContextBlock, ...]:
    """A pass's selected blocks in request order (tags: stable first; lionagi: as registered)."""
    if render == "tags":
        # A kept (fired) outcome always has text; the test only narrows.
        return tuple(ContextBlock(o.name, o.text) for o in kept_in_order(report.outcomes)
                     if o.text is not None)
    return tuple(ContextBlock(row["provider_name"], text)
                 for row, text in zip(report.fired, report.blocks, strict=False))


def _prefix(fold: str, content: Any) -> Any:
    """Put the (non-empty) LionAGI fold in front of a user message's content."""
    if isinstance(content, list):
        return [{"type": "text", "text": fold}, *content]
    text = content if isinstance(content, str) else message_text({"content": content})
    return f"{fold}\n\n{text}" if text else fold


def build_request(history: Sequence[Mapping[str, Any]], instruction: Instruction,
                  blocks: Sequence[ContextBlock], rounds: Sequence[Mapping[str, Any]],
                  render: RenderMode) -> list[dict[str, Any]]:
    """The messages one call sends: ``history`` (left as it is), the instruction, then
    ``rounds``. ``"tags"``: the blocks' tags follow the system text in the system message;
    ``"lionagi"``: none; the first user message starts with ``system + "\\n".join(blocks)
    + guidance`` (the guidance only when it is this instruction) and a blank line."""
    has_system = bool(history) and history[0].get("role") == "system"
    system = message_text(history[0]) if has_system else None
    past = history[1:] if has_system else history
    body = strip_persistence_fields([*past, instruction.to_message(), *rounds])
    if render == "tags":
        parts = [system] if system else []
        if blocks:
            parts.append(render_tagged((b.name, b.text) for b in blocks))
        if system is None and not blocks:
            return body
        return [system_message("\n\n".join(parts)), *body]
    # lionagi: system + "\n".join(blocks) + guidance, folded into the first user message
    # (the instruction's own at the latest); the guidance only when it is the instruction.
    target = next(i for i, m in enumerate(body) if m.get("role") == "user")
    ours = target == len(past)
    fold = render_lionagi(system or "", [b.text for b in blocks],
                          (instruction.guidance or "") if ours else "")
    content: Any = instruction.instruction if ours else body[target].get("content")
    if fold:
        body[target]["content"] = _prefix(fold, content) if content else fold
    return body

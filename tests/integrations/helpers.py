"""Shared pieces of the host-framework tests."""

from __future__ import annotations


class KB:
    """A fetch-only provider that records what it was asked."""

    def __init__(self, name: str = "kb", text: str = "Order 42 ships Monday.") -> None:
        self.name = name
        self.text = text
        self.calls: list[tuple[str, object]] = []

    async def fetch(self, query: str, ctx: object) -> str:
        self.calls.append((query, getattr(ctx, "user_id", None)))
        return self.text


def system_texts(body: dict) -> list[str]:
    """The system messages of a recorded chat request, as text."""
    out = []
    for m in body["messages"]:
        if m.get("role") in ("system", "developer"):
            c = m["content"]
            out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c))
    return out

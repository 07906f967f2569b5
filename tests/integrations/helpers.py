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


class UserKB:
    """A per-user source: its text names the user and tenant it was asked for."""

    context_fields = ("user_id", "tenant_id")

    def __init__(self, name: str = "orders") -> None:
        self.name = name
        self.calls: list[tuple[object, object]] = []

    async def fetch(self, query: str, ctx: object) -> str | None:
        user, tenant = getattr(ctx, "user_id", None), getattr(ctx, "tenant_id", None)
        self.calls.append((user, tenant))
        if user is None:
            return None
        return f"Orders of {user} at {tenant}: #42 ships Monday."


class Hung:
    """A source that waits for an event nobody sets; ``finished`` stays unset unless it
    ever returns."""

    name = "hung"

    def __init__(self) -> None:
        import anyio

        self.started = anyio.Event()
        self.finished = anyio.Event()

    async def fetch(self, query: str, ctx: object) -> str:
        import anyio

        self.started.set()
        await anyio.Event().wait()
        self.finished.set()
        return "never"


def tool_round(body: dict):
    """A scripted reply for chat-completions hosts: call ``lookup`` first, answer after
    the tool result (the same reply whatever order concurrent runs arrive in)."""
    from lionctx.testing import Reply

    if body["messages"][-1].get("role") == "tool":
        return "It ships Monday."
    return Reply.calling("lookup", {"order": "42"})


def script_tool_rounds(server, runs: int) -> None:
    """Queue one tool round (two model calls) for each of ``runs`` runs."""
    server.script(*([tool_round] * (2 * runs)))


def context_of(body: dict) -> str:
    """Everything a recorded request's system side carried, joined."""
    return "\n".join(system_texts(body))

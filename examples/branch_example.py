"""A LionAGI-style Branch with context providers: communicate, stream, operate.

Run: ``python examples/branch_example.py``

* With ``OPENAI_BASE_URL`` (and ``OPENAI_API_KEY`` unless the server is local) set,
  the branch talks to that OpenAI-compatible server (model: ``LIONCTX_MODEL`` or
  ``gpt-4o-mini``).
* Without it, the bundled offline echo server on 127.0.0.1 answers, and the
  ``operate`` step scripts one tool call so the tool loop and the writeback hook run.

What to look for: the provider blocks reach each request, the report says what
happened to every provider, and ``branch.messages`` never holds a block.
"""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
from lionctx import Branch, OpenAIChatModel
from lionctx.providers import FilesystemContextProvider
from lionctx.testing import LocalOpenAIServer, Reply

ORDERS = {"A-17": "shipped 2 days ago, arriving Friday", "B-02": "awaiting stock"}


class RecentTopics:
    """A LionAGI-style provider: ``provide(branch, instruction)``, plus a writeback
    hook that remembers what tools found, for the next turn."""

    name = "memory"

    def __init__(self) -> None:
        self.facts: list[str] = []

    async def provide(self, branch: Branch, instruction: Any) -> str | None:
        turns = sum(1 for m in branch.messages if m["role"] == "user")
        lines = [f"user {branch.run_context.user_id} has asked {turns} question(s) so far"]
        lines += [f"known: {fact}" for fact in self.facts]
        return "\n".join(lines)

    async def writeback(self, branch: Branch, action_responses: list[Any]) -> int:
        for r in action_responses:
            self.facts.append(f"{r.function}({r.arguments}) -> {r.output}")
        return len(action_responses)


def lookup_order(order_id: str) -> str:
    """Look up the shipping status of an order."""
    return ORDERS.get(order_id, "no such order")


def show_report(branch: Branch) -> None:
    report = branch.last_context_report
    assert report is not None  # shown after a turn
    for o in report.outcomes:
        print(f"    {o.name:<8} {o.status.value:<14} {o.tokens:>3} tokens  {o.reason or ''}")


async def main() -> None:
    with ExitStack() as stack:
        notes_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        (notes_dir / "shipping.md").write_text("Standard shipping takes 3-5 business days.\n")

        server: LocalOpenAIServer | None = None
        if os.environ.get("OPENAI_BASE_URL"):
            model = OpenAIChatModel()  # everything from the environment
            print(f"model: {model.model} at {os.environ['OPENAI_BASE_URL']}")
        else:
            server = stack.enter_context(LocalOpenAIServer())
            model = OpenAIChatModel("gpt-4o-mini", base_url=server.base_url)
            print(f"OPENAI_BASE_URL is unset: using the offline echo server at {server.base_url}")

        branch = Branch("You are a helpful shop assistant.", model,
                        run_context={"user_id": "u42", "tenant_id": "acme"})
        memory = RecentTopics()
        branch.providers.register(FilesystemContextProvider(notes_dir, glob="*.md",
                                                            name="notes"), priority=1)
        branch.providers.register(memory)

        print("\n1. communicate (records the instruction and the reply)")
        reply = await branch.communicate("How long does shipping take?")
        print(f"  assistant: {reply}")
        show_report(branch)

        print("\n2. run (streams; the blocks are in this request too)")
        print("  assistant: ", end="")
        async for delta in branch.run("And to Norway?"):
            print(delta, end="", flush=True)
        print()

        print("\n3. operate (tool loop; the memory provider's writeback sees the results)")
        if server is not None:  # the echo model never calls tools: script one call
            server.script(Reply.calling("lookup_order", {"order_id": "A-17"}))
        result = await branch.operate("Where is my order A-17?", tools=[lookup_order])
        for action in result.action_responses:
            if action is not None:
                print(f"  tool {action.function}({action.arguments}) -> {action.output}")
        print(f"  assistant: {result.output}")
        print(f"  memory now knows: {memory.facts}")
        print(f"  writeback records: {branch.providers.stats['writeback_records']}")

        print("\n4. stored history (no provider block in it)")
        for m in branch.messages:
            text = (m.get("content") or "")[:70].replace("\n", " ")
            print(f"  {m['role']:<9} {m['message_uid'][:8]}  {text}")
        assert not any("<context" in str(m.get("content")) for m in branch.messages)

        print("\n5. the same blocks in LionAGI's byte-exact fold (render='lionagi')")
        lionagi = Branch("SYSTEM.", model, render="lionagi")
        request = lionagi.build_request("question", blocks=["BLOCK-1", "BLOCK-2"],
                                        guidance="GUIDANCE")
        print(f"  first user message: {request[0]['content']!r}")


if __name__ == "__main__":
    try:
        anyio.run(main)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None

"""lionctx in Pydantic AI (``pip install 'lionctx[pydantic-ai]'``).

Run: ``python examples/with_pydantic_ai.py`` (offline: the model is lionctx's bundled
local echo server on 127.0.0.1).
"""

from __future__ import annotations

import anyio
from lionctx.integrations.pydantic_ai import context_instructions, report
from lionctx.testing import LocalOpenAIServer, Reply
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


class OrderNotes:
    name = "orders"

    async def fetch(self, query: str, ctx) -> str:
        return f"Orders of {ctx.user_id}: #42 ships Monday."


async def main() -> None:
    with LocalOpenAIServer() as server:
        server.script(Reply.calling("track", {"order": "42"}), "Order 42 ships Monday.")
        model = OpenAIChatModel(
            "lionctx-echo", provider=OpenAIProvider(base_url=server.base_url, api_key="offline"))
        lionctx_instructions = context_instructions([OrderNotes()], budget=500, timeout=2)
        agent = Agent(model, deps_type=dict, instructions=["Be brief.", lionctx_instructions])

        @agent.tool_plain
        def track(order: str) -> str:
            """Track an order."""
            return f"order {order}: in transit"

        result = await agent.run("Where is order 42?", deps={"user_id": "u1"})
        print("reply:", result.output)
        run_report = report(result)
        assert run_report is not None  # every run through the integration has one
        print("model calls:", len(server.requests),
              "| fired:", [o.name for o in run_report.kept])


if __name__ == "__main__":
    anyio.run(main)

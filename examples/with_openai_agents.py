"""lionctx in the OpenAI Agents SDK (``pip install 'lionctx[openai-agents]'``).

Run: ``python examples/with_openai_agents.py`` (offline: the model is lionctx's
bundled local echo server on 127.0.0.1; the SDK's tracing, which would export to
OpenAI, is turned off).
"""

from __future__ import annotations

import anyio
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from lionctx.integrations.openai_agents import context_instructions, report
from lionctx.testing import LocalOpenAIServer, Reply
from openai import AsyncOpenAI


class OrderNotes:
    name = "orders"

    async def fetch(self, query: str, ctx) -> str:
        return f"Orders of {ctx.user_id}: #42 ships Monday."


@function_tool
def track(order: str) -> str:
    """Track an order."""
    return f"order {order}: in transit"


async def main() -> None:
    set_tracing_disabled(True)
    with LocalOpenAIServer() as server:
        server.script(Reply.calling("track", {"order": "42"}), "Order 42 ships Monday.")
        client = AsyncOpenAI(base_url=server.base_url, api_key="offline")
        agent = Agent(name="support",
                      model=OpenAIChatCompletionsModel(model="lionctx-echo", openai_client=client),
                      instructions=context_instructions([OrderNotes()], instructions="Be brief.",
                                                        budget=500, timeout=2),
                      tools=[track])
        result = await Runner.run(agent, "Where is order 42?", context={"user_id": "u1"})
        print("reply:", result.final_output)
        run_report = report(result)
        assert run_report is not None  # every run through the integration has one
        print("model calls:", len(server.requests),
              "| fired:", [o.name for o in run_report.kept])
        print("system:", server.requests[0]["messages"][0]["content"])


if __name__ == "__main__":
    anyio.run(main)

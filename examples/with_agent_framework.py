"""lionctx in Microsoft Agent Framework (``pip install 'lionctx[agent-framework]'``).

Run: ``python examples/with_agent_framework.py`` (offline: the model is lionctx's
bundled local echo server on 127.0.0.1).
"""

from __future__ import annotations

import anyio
import lionctx
from agent_framework import Agent, tool
from agent_framework.openai import OpenAIChatCompletionClient
from lionctx.integrations.agent_framework import LionctxContextProvider, report
from lionctx.testing import LocalOpenAIServer, Reply


class OrderNotes:
    name = "orders"

    async def fetch(self, query: str, ctx) -> str:
        return f"Orders of {ctx.user_id}: #42 ships Monday."


@tool
def track(order: str) -> str:
    """Track an order."""
    return f"order {order}: in transit"


async def main() -> None:
    with LocalOpenAIServer() as server:
        server.script(Reply.calling("track", {"order": "42"}), "Order 42 ships Monday.")
        client = OpenAIChatCompletionClient(model="lionctx-echo", base_url=server.base_url,
                                            api_key="offline")
        provider = LionctxContextProvider([OrderNotes()], budget=500, timeout=2)
        agent = Agent(client=client, instructions="Be brief.", context_providers=[provider],
                      tools=[track])
        session = agent.create_session()
        # SessionContext carries no user: bind one around the run.
        with lionctx.bind_run_context(user_id="u1"):
            response = await agent.run("Where is order 42?", session=session)
        print("reply:", response.text)
        run_report = report(response)
        assert run_report is not None  # every run through the integration has one
        print("model calls:", len(server.requests),
              "| fired:", [o.name for o in run_report.kept])
        print("session report:",
              [o["status"] for o in session.state["lionctx"]["report"]["outcomes"]])


if __name__ == "__main__":
    anyio.run(main)

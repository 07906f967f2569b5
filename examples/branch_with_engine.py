"""A Branch hosting a context engine: the example ``topic`` plugin, offline.

    python examples/branch_with_engine.py

The plugin lives in ``examples/plugins/context_engine/topic/``; naming it in the
branch's ``context_engine=`` (with this folder as a plugin path) activates it. Before
each request it keeps the system prompt, the current question and only the earlier
exchanges about the same topic; the stored history keeps everything. A follow-up
without topic words ("And after that?") inherits the previous topic, which the engine
learned in ``on_turn_complete``.

The bundled :class:`~lionctx.testing.LocalOpenAIServer` answers on 127.0.0.1 as an
offline echo model (no language model is involved) and records each request, so the
output shows exactly what was sent. Leaving ``async with`` ends the engine's session.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from lionctx import Branch, OpenAIChatModel
from lionctx.testing import LocalOpenAIServer

HERE = Path(__file__).resolve().parent

QUESTIONS = [
    "What is a good pasta shape for a creamy sauce?",
    "How do I reverse a list in Python?",
    "Should the pasta water be salted?",
    "How do I sort a Python dict by value?",
    "How long should the pasta boil?",
    "And after that?",
]


async def main() -> None:
    with LocalOpenAIServer() as server:
        model = OpenAIChatModel("lionctx-echo", base_url=server.base_url, max_retries=0)
        async with Branch("You are a helpful assistant.", model, context_engine="topic",
                          engine_config={"plugin_paths": [str(HERE)]}) as branch:
            assert branch.context_engine is not None  # the topic plugin, loaded by name
            print(f"context engine: {branch.context_engine.name}\n")
            for question in QUESTIONS:
                await branch.communicate(question)
                sent = server.last_request["messages"]
                earlier = [m for m in sent[1:-1] if m["role"] == "user"]
                print(f"Q: {question}")
                print(f"   stored {len(branch.messages)} messages, "
                      f"sent {len(sent)} (earlier questions kept: {len(earlier)})")
                for message in earlier:
                    print(f"     - {message['content']}")
        await model.aclose()


if __name__ == "__main__":
    anyio.run(main)

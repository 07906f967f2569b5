"""Load the example ``topic`` context engine as a directory plugin and route a request.

Runs offline; no model is called. The plugin lives in
``examples/plugins/context_engine/topic/``: this folder is its search path.

    python examples/topic_engine.py
"""

from __future__ import annotations

from pathlib import Path

from lionctx.engines import engine_for_agent, list_context_engines

HERE = Path(__file__).resolve().parent

HISTORY = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is a good pasta shape for a creamy sauce?"},
    {"role": "assistant", "content": "Fettuccine or rigatoni hold creamy sauces well."},
    {"role": "user", "content": "How do I reverse a list in Python?"},
    {"role": "assistant", "content": "Use reversed(items) or items[::-1]."},
    {"role": "user", "content": "Should the pasta water be salted?"},
    {"role": "assistant", "content": "Yes, salt the water generously before the pasta goes in."},
    {"role": "user", "content": "And how do I sort a Python dict by value?"},
    {"role": "assistant", "content": "sorted(d.items(), key=lambda kv: kv[1])."},
]


def main() -> None:
    for info in list_context_engines([HERE]):
        state = "available" if info.available else f"unavailable ({info.error})"
        print(f"engine {info.name!r} from {info.source}: {info.description} [{state}]")

    # Named in the configuration, so activated; each agent gets its own clone.
    engine = engine_for_agent({"context": {"engine": "topic"}}, search_paths=[HERE])
    print(f"\nactive engine: {engine.name}\n")

    incoming = {"role": "user", "content": "How long should the pasta boil?"}
    request = [*HISTORY, incoming]
    # The hook a host calls before each model request (Branch and Agent call it for
    # you, checked and time-bounded); None would mean "send the request unchanged".
    selected = engine.select_context(
        request, conversation_messages=HISTORY, incoming_message=incoming
    ) or request
    print(f"request: {len(request)} messages -> sent: {len(selected)} messages")
    for message in selected:
        print(f"  {message['role']:>9}: {message['content']}")


if __name__ == "__main__":
    main()

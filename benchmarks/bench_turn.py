"""One turn's own cost, on both faces: what ``Branch.communicate`` and ``Agent.run``
add around the model call.

The model answers in-process at once (no HTTP), so the figure is the turn machinery
alone: request building, storing, uids, and (in the engine rows) a context engine that
overrides every hook the turn calls. Baseline: the bare ``await model.complete(request)``
on a prebuilt request, measured in the same run. Event-loop CPU time per turn, best
of five rounds. The conversation is reset each turn so every turn sees the same short
history.

Run: ``python -m benchmarks turn``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentium_compat import Agent
from lionctx import Branch
from lionctx.engines import ContextEngine
from lionctx.models import ChatResponse

from .common import Row, best_cpu_of, format_table, machine_line, row

USAGE = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}


class InstantModel:
    """A chat model that answers at once with a fixed reply."""

    async def complete(self, messages: Any, *, tools: Any = None, **kwargs: Any) -> ChatResponse:
        return ChatResponse("fine, thanks", usage=dict(USAGE))

    def stream(self, messages: Any, **kwargs: Any) -> Any:
        # never called here; a Branch once refused a model without it
        raise NotImplementedError


class Observing(ContextEngine):
    """Overrides every hook a turn calls, doing nothing in each (selection: keep)."""

    @property
    def name(self) -> str:
        return "observing"

    def update_from_response(self, usage: Mapping[str, Any]) -> None:
        pass

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        return False

    def compress(self, messages: Any, current_tokens: Any = None, focus_topic: Any = None) -> Any:
        return messages

    def select_context(self, request_messages: Any, **kwargs: Any) -> Any:
        return None

    def on_turn_complete(self, messages: Any, usage: Any = None, **kwargs: Any) -> None:
        pass


async def _turns(rows: list[Row]) -> None:
    model = InstantModel()
    request = [{"role": "system", "content": "You are helpful."},
               {"role": "user", "content": "how are you?"}]
    base = await best_cpu_of(lambda: model.complete(request), repeat=5, number=2000)

    for label, engine in (("", None), (" + engine", "observing")):
        branch = Branch("You are helpful.", model,
                        context_engine=Observing() if engine else None)

        async def branch_turn(branch: Branch = branch) -> None:
            await branch.communicate("how are you?")
            del branch.messages[1:]

        agent = Agent(name="bot", model=model, instructions="You are helpful.",
                      context_engine=Observing() if engine else None)

        async def agent_turn(agent: Agent = agent) -> None:
            await agent.run("how are you?")

        number = 300 if engine else 2000
        t_branch = await best_cpu_of(branch_turn, repeat=5, number=number)
        t_agent = await best_cpu_of(agent_turn, repeat=5, number=number)
        rows.append(row(f"turn: Branch.communicate{label}", t_branch * 1e6, base * 1e6, "us",
                        "the turn around the model call", "bare model.complete"))
        rows.append(row(f"turn: Agent.run{label}", t_agent * 1e6, base * 1e6, "us",
                        "instructions + the same turn", "bare model.complete"))


def run() -> list[Row]:
    import anyio

    rows: list[Row] = []
    anyio.run(_turns, rows)
    return rows


if __name__ == "__main__":
    print(machine_line())
    print(format_table(run()))

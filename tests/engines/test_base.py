import copy
import json

import pytest
from lionctx.engines import ContextCompressor, ContextEngine, usage_counts
from lionctx.engines._base import overrides
from openai.types import CompletionUsage


class MinimalEngine(ContextEngine):
    """Implements only what the contract requires."""

    def __init__(self, context_length: int = 0) -> None:
        self.context_length = context_length
        self.state: dict[str, list[str]] = {"seen": []}

    @property
    def name(self) -> str:
        return "minimal"

    def update_from_response(self, usage):
        counts = usage_counts(usage)
        if counts:
            self.last_prompt_tokens, self.last_completion_tokens, self.last_total_tokens = counts

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None):
        return list(messages)


class SelectingEngine(MinimalEngine):
    def select_context(self, request_messages, **kwargs):
        return request_messages


# -- the page's own two test examples, for the built-in engine ----------------------


def test_engine_satisfies_abc():
    engine = ContextCompressor(context_length=200000)
    assert isinstance(engine, ContextEngine)
    assert engine.name == "compressor"


def test_compress_returns_valid_messages():
    engine = ContextCompressor(context_length=200000)
    msgs = [{"role": "user", "content": "hello"}]
    result = engine.compress(msgs)
    assert isinstance(result, list)
    assert all("role" in m for m in result)


# -- the contract -------------------------------------------------------------------


def test_abstract_members_are_required():
    class Incomplete(ContextEngine):
        @property
        def name(self):
            return "incomplete"

    with pytest.raises(TypeError):
        Incomplete()


def test_attributes_default_to_zero():
    engine = MinimalEngine()
    for attr in (
        "last_prompt_tokens",
        "last_completion_tokens",
        "last_total_tokens",
        "threshold_tokens",
        "context_length",
        "compression_count",
    ):
        assert getattr(engine, attr) == 0


def test_optional_hooks_are_noops():
    engine = MinimalEngine()
    msgs = [{"role": "user", "content": "x"}]
    assert engine.select_context(msgs, conversation_messages=msgs, incoming_message=msgs[0]) is None
    assert engine.on_turn_complete(msgs, usage=None, turn_id="t") is None
    assert engine.on_session_start("s") is None
    assert engine.on_session_end("s", msgs) is None


def test_engine_tools_default():
    engine = MinimalEngine()
    assert engine.get_tool_schemas() == []
    assert json.loads(engine.handle_tool_call("nope", {})) == {"error": "Unknown tool: nope"}


def test_session_reset_clears_counters():
    engine = MinimalEngine()
    engine.update_from_response({"prompt_tokens": 10, "completion_tokens": 5})
    engine.compression_count = 3
    engine.on_session_reset()
    assert (engine.last_prompt_tokens, engine.last_total_tokens,
            engine.compression_count) == (0, 0, 0)


def test_update_model_sets_context_length_and_checks_it():
    engine = MinimalEngine()
    engine.update_model("gpt-x", context_length=32000)
    assert engine.context_length == 32000
    with pytest.raises(TypeError, match="'big'"):
        engine.update_model(context_length="big")
    with pytest.raises(ValueError, match="-1"):
        engine.update_model(context_length=-1)


def test_default_clone_is_an_independent_deep_copy():
    engine = MinimalEngine(context_length=1000)
    engine.state["seen"].append("a")
    clone = engine.clone_for_agent()
    assert isinstance(clone, MinimalEngine) and clone is not engine
    assert clone.state == engine.state and clone.state is not engine.state
    clone.state["seen"].append("b")
    assert engine.state["seen"] == ["a"]


# -- overrides ----------------------------------------------------------------------


def test_overrides_is_an_identity_check():
    assert not overrides(MinimalEngine(), "select_context")
    assert not overrides(MinimalEngine(), "on_turn_complete")
    assert overrides(SelectingEngine(), "select_context")
    assert not overrides(SelectingEngine(), "on_turn_complete")
    assert not overrides(ContextCompressor(), "select_context")


def test_overrides_sees_instance_attributes_and_subclass_chains():
    class Child(SelectingEngine):
        pass

    assert overrides(Child(), "select_context")
    engine = MinimalEngine()
    engine.on_turn_complete = lambda messages, usage=None, **kw: None
    assert overrides(engine, "on_turn_complete")


def test_overrides_rejects_unknown_hook_names():
    with pytest.raises(ValueError, match="'select_contxt'"):
        overrides(MinimalEngine(), "select_contxt")


# -- usage --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}, (7, 3, 10)),
        ({"prompt_tokens": 7, "completion_tokens": 3}, (7, 3, 10)),
        ({"input_tokens": 4, "output_tokens": 1}, (4, 1, 5)),
        ({"total_tokens": 9}, (0, 0, 9)),
        ({}, None),
        (None, None),
        ({"prompt_tokens": True}, None),
        (CompletionUsage(prompt_tokens=12, completion_tokens=2, total_tokens=14), (12, 2, 14)),
    ],
)
def test_usage_counts(usage, expected):
    assert usage_counts(usage) == expected


def test_engine_deepcopy_keeps_class_attributes_separate():
    engine = MinimalEngine()
    engine.last_prompt_tokens = 5
    clone = copy.deepcopy(engine)
    clone.last_prompt_tokens = 6
    assert engine.last_prompt_tokens == 5
    assert MinimalEngine.last_prompt_tokens == 0

"""Engines the host tests share: one that records every hook, one that overrides none."""

import copy
import json

from lionctx.engines import ContextEngine


class Recorder(ContextEngine):
    """Overrides every hook and records each call with its arguments."""

    def __init__(self, context_length=50_000):
        self.context_length = context_length
        self.calls = []
        self.selection = None  # request -> list | None
        self.compact = None  # messages -> list
        self.due = False
        self.tools = []

    @property
    def name(self):
        return "recorder"

    def names(self):
        return [c[0] for c in self.calls]

    def of(self, hook):
        return [c for c in self.calls if c[0] == hook]

    def update_from_response(self, usage):
        self.calls.append(("update_from_response", usage))
        self.last_prompt_tokens = usage.get("prompt_tokens", 0)

    def should_compress(self, prompt_tokens=None):
        self.calls.append(("should_compress", prompt_tokens))
        return self.due

    def compress(self, messages, current_tokens=None, focus_topic=None):
        self.calls.append(("compress", copy.deepcopy(messages), current_tokens))
        return self.compact(messages) if self.compact else messages

    def on_session_start(self, session_id=None, **kwargs):
        self.calls.append(("on_session_start", session_id))

    def on_session_end(self, session_id=None, messages=None, **kwargs):
        self.calls.append(("on_session_end", session_id, messages))

    def on_session_reset(self):
        super().on_session_reset()
        self.calls.append(("on_session_reset",))

    def get_tool_schemas(self):
        return self.tools

    def handle_tool_call(self, name, args, **kwargs):
        self.calls.append(("handle_tool_call", name, args, kwargs))
        return json.dumps({"found": args.get("query"), "by": name})

    def select_context(self, request_messages, *, conversation_messages=None,
                       incoming_message=None, budget_tokens=0):
        self.calls.append(("select_context", request_messages, conversation_messages,
                           incoming_message, budget_tokens))
        return self.selection(request_messages) if self.selection else None

    def on_turn_complete(self, messages, usage=None, **kwargs):
        self.calls.append(("on_turn_complete", messages, usage, kwargs))


class Plain(ContextEngine):
    """Implements only the required members: no optional hook is overridden."""

    def __init__(self, name="plain"):
        self._name = name
        self.usages = []
        self.calls = []

    @property
    def name(self):
        return self._name

    def update_from_response(self, usage):
        self.usages.append(usage)

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None):
        return messages

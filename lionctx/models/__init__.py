"""Model adapters. ``OpenAIChatModel`` speaks to any OpenAI-compatible server.

Importing this package does not import ``openai``; the first call does.
"""

from .._exceptions import (
    ModelAuthError,
    ModelConfigError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
)
from ._base import ChatModel, ChatResponse, ChatStream
from ._openai_chat import DEFAULT_MODEL, OpenAIChatModel, OpenAIChatStream
from ._tools import ActionResponse, Tool, as_tool, run_tool_call

__all__ = ["DEFAULT_MODEL", "ActionResponse", "ChatModel", "ChatResponse", "ChatStream",
           "ModelAuthError", "ModelConfigError", "ModelConnectionError", "ModelError",
           "ModelResponseError", "OpenAIChatModel", "OpenAIChatStream", "Tool", "as_tool",
           "run_tool_call"]


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())

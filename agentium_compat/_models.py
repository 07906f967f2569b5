"""agentium's model factory: ``openai("gpt-4o")``, ``openai("gpt-4o", {"baseURL": url})``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lionctx import OpenAIChatModel

from ._context import camel
from ._options import Words, read_options

__all__ = ["OpenAIChatModel", "openai"]

# Every option name openai() takes, in each spelling -> OpenAIChatModel's keyword.
_OPTIONS = {spelling: name for name in ("base_url", "api_key", "timeout", "max_retries",
                                        "params", "include_usage")
            for spelling in (name, camel(name))} | {"baseURL": "base_url", "timeoutMs": "timeout"}
_WORDS = Words("openai() options must be a mapping (agentium's options object), got {type}",
               "openai() got an unknown option {key!r}{hint}",
               "openai() got {first!r} and {key!r} (the same option): give one, not both")


def openai(
    model: str | None = None,
    options: Mapping[str, Any] | None = None,
    /,
    **keywords: Any,
) -> OpenAIChatModel:
    """An OpenAI-compatible chat model, as agentium's ``openai(modelName, options)``.

    Options come as agentium's options object (``openai("gpt-4o", {"baseURL": url,
    "apiKey": key})``), as keywords (``base_url=`` / ``baseURL=``, ``api_key=`` /
    ``apiKey=``), or both. ``baseURL`` / ``apiKey`` default to ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY``; ``timeout`` (seconds; ``timeoutMs`` in milliseconds),
    ``maxRetries``, ``params`` and ``includeUsage`` go to
    :class:`~lionctx.OpenAIChatModel`. An unknown option, or one given twice (in two
    spellings, or in the object and as a keyword), raises ``TypeError`` naming it.
    Nothing is contacted until the first call.
    """
    given = read_options(_WORDS, options, keywords, _OPTIONS)
    in_ms = given.get("timeout") if "timeoutMs" in {**(options or {}), **keywords} else None
    if isinstance(in_ms, (int, float)) and not isinstance(in_ms, bool):
        given["timeout"] = in_ms / 1000.0
    return OpenAIChatModel(model, **given)

"""agentium's model factory: ``openai("gpt-4o")``, ``openai("gpt-4o", {"baseURL": url})``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lionctx import InvalidType, OpenAIChatModel
from lionctx._suggest import unknown_option  # extension: the core's "did you mean" errors

from ._context import camel

__all__ = ["OpenAIChatModel", "openai"]

# Every option name openai() takes, in each spelling -> OpenAIChatModel's keyword.
_OPTIONS = {spelling: name for name in ("base_url", "api_key", "timeout", "max_retries",
                                        "params", "include_usage")
            for spelling in (name, camel(name))} | {"baseURL": "base_url", "timeoutMs": "timeout"}


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
    if options is not None and not isinstance(options, Mapping):
        raise InvalidType(f"openai() options must be a mapping (agentium's options "
                          f"object), got {type(options).__name__}")
    given: dict[str, tuple[str, Any]] = {}
    for key, value in [*(options or {}).items(), *keywords.items()]:
        target = _OPTIONS.get(key) if isinstance(key, str) else None
        if target is None:
            raise unknown_option("openai()", key, _OPTIONS)
        if target in given:
            raise InvalidType(f"openai() got {given[target][0]!r} and {key!r} (the same "
                              "option): give one, not both")
        if key == "timeoutMs" and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            value = value / 1000.0
        given[target] = (key, value)
    return OpenAIChatModel(model, **{name: value for name, (_, value) in given.items()})

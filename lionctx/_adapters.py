"""The one place where the two provider shapes meet.

LionAGI's ``await provider.provide(branch, instruction)`` and agentium's
``await provider.fetch(query, ctx)`` (or ``fetchContext``): each face calls
providers through one function here, so a provider of either shape works on either
face. A ``ContextSource`` is called through its ``retrieve(query, ctx)``, which
raises ``SourceUnavailable`` (a ``failed`` row) where ``fetch`` returns ``None``.
"""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any

from ._context import RunContext, coerce_run_context
from ._exceptions import InvalidType
from ._messages import instruction_text
from ._text import make_encodable
from ._threads import run_in_worker

__all__ = [
    "call_fetch",
    "call_provide",
    "fetch_invoker",
    "fetch_method",
    "provide_invoker",
    "provider_name",
    "query_from_instruction",
    "retrieve_method",
    "run_context_from_branch",
]


def provider_name(provider: Any, explicit: str | None = None, *,
                  agentium: bool = False) -> str:
    """Explicit name, then a truthy ``name``, then the class name (ADR-0008 D1).

    ``agentium=True`` also accepts the published agentium code's ``label`` after
    ``name``. A name that cannot be encoded as UTF-8 (a lone surrogate, say from an
    undecodable file name) has those characters replaced with U+FFFD: names are
    sent to the model in the ``<context name="...">`` tag.
    """
    if explicit:
        return _encodable_name(explicit)
    try:  # the common case first: a plain str ``name``
        value = getattr(provider, "name", None)
    except Exception:
        value = None
    if value.__class__ is str and value:
        return value if value.isascii() else _encodable_name(value)
    for attr in (("name", "label") if agentium else ("name",)):
        try:
            value = getattr(provider, attr, None)
        except Exception:
            value = None
        if value and isinstance(value, str):
            return value if value.isascii() else _encodable_name(value)
    return type(provider).__name__


def _encodable_name(name: str) -> str:
    return make_encodable(name)[0]


# Whether a provide/fetch function is ``async def``, by function object: the check
# costs more than the call it guards. Bounded, since closures come and go.
_IS_ASYNC: dict[Any, bool] = {}


def _is_async(method: Any) -> bool:
    func = getattr(method, "__func__", method)
    try:
        known = _IS_ASYNC.get(func)
    except TypeError:  # unhashable callable
        return inspect.iscoroutinefunction(method)
    if known is None:
        # An object with an ``async def __call__`` is awaited as itself too.
        call = (None if inspect.isroutine(method)
                else getattr(type(method), "__call__", None))  # noqa: B004
        known = inspect.iscoroutinefunction(method) or inspect.iscoroutinefunction(call)
        if len(_IS_ASYNC) > 4096:
            _IS_ASYNC.clear()
        _IS_ASYNC[func] = known
    return known


async def _call_blocking_or_async(provider: Any, method: Any, *args: Any,
                                  must_await: bool = False) -> Any:
    """Await ``method(*args)``; a sync method runs in a lionctx worker thread.

    A sync ``provide``/``fetch`` would otherwise block the event loop for its whole
    run, past every timeout. In the thread it is abandoned when its timeout fires.
    If it returns an awaitable (a plain function that builds a coroutine), that is
    awaited on the loop.
    """
    if _is_async(method):
        return await method(*args)
    result = await run_in_worker(partial(method, *args), key=id(provider))
    if inspect.isawaitable(result):
        return await result
    if must_await:
        raise InvalidType(
            f"provide() of {type(provider).__name__} is not async: it returned "
            f"{type(result).__name__} instead of an awaitable; define it with async def")
    return result


def fetch_method(provider: Any) -> Any:
    """The agentium ``fetch`` (or legacy ``fetchContext``) of ``provider``, or None."""
    method = getattr(provider, "fetch", None)
    if method is None or not callable(method):
        method = getattr(provider, "fetchContext", None)
    return method if callable(method) else None


def retrieve_method(provider: Any) -> Any:
    """The failure-raising ``retrieve(query, ctx)`` of a ContextSource, or None.

    Only a class that :class:`lionctx.providers._base.ContextSource` marks as
    answering through ``retrieve`` qualifies (read from the class, so an instance
    attribute cannot claim it): an unrelated object's ``retrieve`` method may mean
    anything, and a subclass that overrides ``fetch`` is called through its
    override.
    """
    if getattr(type(provider), "_lionctx_retrieves", False) is not True:
        return None
    method = getattr(provider, "retrieve", None)
    return method if callable(method) else None


def query_from_instruction(instruction: Any) -> str:
    """The user's text inside a LionAGI-style instruction (or the string itself).

    For a real LionAGI ``Instruction`` this is its guidance, instruction and context
    the way LionAGI renders them (see :func:`lionctx._messages.instruction_text`).
    """
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    content = getattr(instruction, "content", None)
    if content is not None and hasattr(content, "prompt_context"):
        # A real LionAGI Instruction: its content rendered as LionAGI renders it.
        return instruction_text(content)
    for attr in ("instruction", "content", "text"):
        value = getattr(instruction, attr, None)
        if isinstance(value, str):
            return value
    return str(instruction)


def run_context_from_branch(branch: Any) -> RunContext:
    """The run context a branch carries (``branch.run_context``); when it carries none
    (a real LionAGI ``Branch``), the one bound by :func:`lionctx.bind_run_context`,
    else an empty one."""
    ctx = getattr(branch, "run_context", None) if branch is not None else None
    return coerce_run_context(ctx)


def provide_invoker(provider: Any) -> Any:
    """What a pass awaits as ``invoke(branch, instruction)``: an ``async def provide``
    itself (one coroutine per call, as in LionAGI), else :func:`call_provide`."""
    try:
        provide = getattr(provider, "provide", None)
        if provide is not None and _is_async(provide):
            return provide
    except Exception:  # a property that raises fails inside the call's containment
        pass
    return partial(call_provide, provider)


_MISSING = object()


def fetch_invoker(provider: Any) -> Any:
    """What a pass awaits as ``invoke(query, ctx)``: a ContextSource's ``retrieve`` or
    an ``async def fetch`` itself, else :func:`call_fetch`."""
    try:
        if getattr(provider, "_lionctx_retrieves", _MISSING) is _MISSING:
            # Not a ContextSource (the common case: the flag is nowhere, on the
            # instance or its class; asking the instance is the cheap way to know,
            # a missed look-up on a class costs an exception): its fetch, once.
            method = getattr(provider, "fetch", None)
            if method is None or not callable(method):
                method = fetch_method(provider)
        else:
            method = retrieve_method(provider) or fetch_method(provider)
        if method is not None and _is_async(method):
            return method
    except Exception:  # a property that raises fails inside the call's containment
        pass
    return partial(call_fetch, provider)


async def call_provide(provider: Any, branch: Any, instruction: Any) -> Any:
    """LionAGI face: ``provide(branch, instruction)``, or ``fetch`` adapted to it.

    A sync ``provide`` runs in a worker thread under the same timeout rules, so it
    cannot block the event loop; unless it returned an awaitable it then fails
    (contained), as a non-async ``provide`` does in LionAGI. A sync ``fetch``
    (agentium's shape, adapted) runs in a worker thread and its result counts.
    """
    provide = getattr(provider, "provide", None)
    if provide is not None:
        return await _call_blocking_or_async(provider, provide, branch, instruction,
                                             must_await=True)
    fetch = fetch_method(provider)
    if fetch is None:
        raise AttributeError(
            f"context provider {type(provider).__name__} has no provide() or fetch()"
        )
    return await _call_blocking_or_async(
        provider, fetch, query_from_instruction(instruction), run_context_from_branch(branch))


async def call_fetch(provider: Any, query: str, ctx: Any) -> Any:
    """agentium face: ``fetch(query, ctx)`` (or ``fetchContext``); sync results accepted.

    A ContextSource is called through ``retrieve`` instead (same text, but a source
    that could not answer raises ``SourceUnavailable`` rather than returning None).
    """
    retrieve = retrieve_method(provider)
    if retrieve is not None:
        return await retrieve(query, ctx)
    fetch = fetch_method(provider)
    if fetch is None:
        raise AttributeError(
            f"context provider {type(provider).__name__} has no fetch() or fetchContext()"
        )
    return await _call_blocking_or_async(provider, fetch, query, ctx)

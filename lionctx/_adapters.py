"""Where the two provider shapes meet: LionAGI's ``provide(branch, instruction)`` and
agentium's ``fetch(query, ctx)`` (or ``fetchContext``), each callable from either face.
A ``ContextSource`` is called through ``retrieve``, which raises ``SourceUnavailable``
(a ``failed`` row) where ``fetch`` returns ``None``."""

from __future__ import annotations

import inspect
from collections.abc import Hashable
from contextlib import suppress
from functools import partial
from typing import Any
from weakref import WeakKeyDictionary

from ._context import RunContext, coerce_run_context
from ._exceptions import InvalidType
from ._messages import instruction_text
from ._safe_text import read_attr
from ._text import make_encodable
from ._threads import run_in_worker

__all__ = ["call_fetch", "call_provide", "fetch_invoker", "fetch_method", "provide_invoker",
           "provider_name", "query_from_instruction", "retrieve_method",
           "run_context_from_branch"]


def provider_name(provider: Any, explicit: str | None = None, *, agentium: bool = False) -> str:
    """Explicit name, then a truthy str ``name`` (then agentium's ``label`` with
    ``agentium=True``), then the class name: a plain ``str`` in which what UTF-8 cannot
    encode (a lone surrogate) is U+FFFD, since names go to the model in the tag."""
    if isinstance(explicit, str) and str.__len__(explicit):  # never a subclass's __len__
        return make_encodable(str.__str__(explicit))[0]
    for attr in (("name", "label") if agentium else ("name",)):
        value = read_attr(provider, attr)
        if isinstance(value, str) and str.__len__(value):
            # A plain copy: a str subclass's __format__ would write the tag's name itself.
            value = str.__str__(value)
            return value if value.isascii() else make_encodable(value)[0]
    return type(provider).__name__


# Whether a provide/fetch function is ``async def`` (the check costs more than the call);
# weakly: a closure built per request (and the connection it holds) goes with its provider.
_IS_ASYNC: WeakKeyDictionary[Any, bool] = WeakKeyDictionary()


def _is_async(method: Any) -> bool:
    func = getattr(method, "__func__", method)
    try:
        return _IS_ASYNC[func]
    except (KeyError, TypeError):  # not seen yet, or not weakly referable or hashable
        pass
    # An object with an ``async def __call__`` is awaited as itself too.
    call = None if inspect.isroutine(method) else getattr(type(method), "__call__", None)  # noqa: B004
    known = inspect.iscoroutinefunction(method) or inspect.iscoroutinefunction(call)
    with suppress(TypeError):
        _IS_ASYNC[func] = known
    return known


def _worker_key(provider: Any) -> Hashable:
    """Whose stuck threads a sync call counts toward: its stated source, else class and name."""
    identity = read_attr(provider, "source_identity")  # a property that raises states nothing
    if type(identity) is str:
        return ("source", identity)
    return (type(provider), provider_name(provider))


async def _call_blocking_or_async(provider: Any, method: Any, *args: Any,
                                  must_await: bool = False) -> Any:
    """Await ``method(*args)``; a sync one runs in a worker thread (abandoned at its
    timeout) so it cannot block the loop, and an awaitable it returns is awaited."""
    if _is_async(method):
        return await method(*args)
    result = await run_in_worker(partial(method, *args), key=_worker_key(provider))
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
    """The failure-raising ``retrieve(query, ctx)`` of a ContextSource class that does not
    override ``fetch`` (an instance cannot claim it), or None."""
    if getattr(type(provider), "_lionctx_retrieves", False) is not True:
        return None
    method = getattr(provider, "retrieve", None)
    return method if callable(method) else None


def query_from_instruction(instruction: Any) -> str:
    """The user's text inside a LionAGI-style instruction (or the string itself); a
    real LionAGI ``Instruction`` as LionAGI renders it (:func:`instruction_text`)."""
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    content = getattr(instruction, "content", None)
    if content is not None and hasattr(content, "prompt_context"):  # a LionAGI Instruction
        return instruction_text(content)
    for attr in ("instruction", "content", "text"):
        if isinstance(value := getattr(instruction, attr, None), str):
            return value
    return str(instruction)


def run_context_from_branch(branch: Any) -> RunContext:
    """``branch.run_context``; without one (a LionAGI ``Branch``), the bound run
    context, else an empty one."""
    return coerce_run_context(getattr(branch, "run_context", None))


def provide_invoker(provider: Any) -> Any:
    """What a pass awaits as ``invoke(branch, instruction)``: an ``async def provide``
    itself, else :func:`call_provide`."""
    method = _awaited(lambda: getattr(provider, "provide", None))
    return method if method is not None else partial(call_provide, provider)


def fetch_invoker(provider: Any) -> Any:
    """What a pass awaits as ``invoke(query, ctx)``: a ContextSource's ``retrieve`` or
    an ``async def fetch`` itself, else :func:`call_fetch`."""
    method = _awaited(lambda: retrieve_method(provider) or fetch_method(provider))
    return method if method is not None else partial(call_fetch, provider)


def _awaited(find: Any) -> Any:
    """The method ``find()`` gives when it is ``async def`` (awaited as it is), else None."""
    try:
        method = find()
        return method if method is not None and _is_async(method) else None
    except Exception:  # a property that raises fails inside the call's containment
        return None


async def call_provide(provider: Any, branch: Any, instruction: Any) -> Any:
    """LionAGI face: ``provide(branch, instruction)``, or :func:`call_fetch` on the
    instruction's text and the branch's run context. A sync ``provide`` runs in a worker
    thread and fails unless it returned an awaitable (as in LionAGI)."""
    if (provide := getattr(provider, "provide", None)) is None:
        return await call_fetch(provider, query_from_instruction(instruction),
                                run_context_from_branch(branch))
    return await _call_blocking_or_async(provider, provide, branch, instruction, must_await=True)


async def call_fetch(provider: Any, query: str, ctx: Any) -> Any:
    """agentium face: ``fetch(query, ctx)`` (or ``fetchContext``), sync or async; a
    ContextSource through ``retrieve``."""
    if (retrieve := retrieve_method(provider)) is not None:
        return await retrieve(query, ctx)
    if (fetch := fetch_method(provider)) is None:
        raise AttributeError(
            f"context provider {type(provider).__name__} has no fetch() or fetchContext()"
        )
    return await _call_blocking_or_async(provider, fetch, query, ctx)

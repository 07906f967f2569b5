"""lionctx inside a real LionAGI ``Branch`` (``pip install 'lionctx[lionagi]'``).

lionctx's built-in providers register in a ``lionagi.Branch`` as they are
(:func:`provider` wraps a ``fetch(query, ctx)`` one); :func:`install` puts a lionctx
registry in LionAGI's place, run once per user call::

    install(branch, registry, run_context=lambda branch: {"user_id": current_user()})
    await branch.ReAct(instruct={"instruction": "Where is my order?"}, tools=[...])
    report(branch).outcomes       # lionctx's report of that call, one row per provider

Nothing here imports ``lionagi``; see ``docs/integrations.md``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._adapters import call_fetch, provider_name, query_from_instruction, run_context_from_branch
from .._context import bind_run_context
from .._exceptions import InvalidType, TokenizerDataError
from .._log import logger_for
from .._messages import instruction_text
from .._report import Report
from ._turns import DEFAULT_TIMEOUT, Once, check_run_context, host_context

if TYPE_CHECKING:
    from ..registry import ContextProviderRegistry, ProviderReport

__all__ = ["DEFAULT_TIMEOUT", "LionagiProvider", "install", "instruction_text", "provider",
           "report", "use_bundled_tokenizer"]

logger = logger_for(__name__)

#: Where tiktoken fetches o200k_base from; its cache file is named by this URL's sha1.
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def use_bundled_tokenizer(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Seed tiktoken's cache with lionctx's bundled ``o200k_base``; return the file.

    The directory is ``cache_dir``, else ``$TIKTOKEN_CACHE_DIR``, else a
    ``lionctx-tiktoken`` folder in the temp directory; ``TIKTOKEN_CACHE_DIR`` is set
    to it, so tiktoken (and LionAGI's tokenizer) reads it instead of downloading.
    Call it before the first token count of the process (tiktoken keeps an encoding).
    """
    from .._tokens import O200K_FILE, O200K_SHA256

    folder = Path(cache_dir or os.environ.get("TIKTOKEN_CACHE_DIR")
                  or Path(tempfile.gettempdir()) / "lionctx-tiktoken")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if not (target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256):
        raw = gzip.decompress(O200K_FILE.read_bytes())
        if hashlib.sha256(raw).hexdigest() != O200K_SHA256:
            raise TokenizerDataError(f"lionctx's bundled tokenizer data {O200K_FILE} is corrupt; "
                               "reinstall lionctx")
        partial = target.with_name(target.name + f".{os.getpid()}.tmp")
        partial.write_bytes(raw)
        os.replace(partial, target)  # atomic: a concurrent reader never sees half a file
        logger.debug("seeded tiktoken cache %s", target)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    return target


class LionagiProvider:
    """``inner`` (a ``fetch(query, ctx)`` provider) with LionAGI's ``provide(branch,
    instruction)``, for ``lionagi.Branch.providers.register``."""

    def __init__(self, inner: Any, name: str | None = None) -> None:
        if not callable(getattr(inner, "fetch", None)) and not callable(
                getattr(inner, "fetchContext", None)):
            raise InvalidType(f"provider: {inner!r} has no fetch(query, ctx) or "
                            f"fetchContext(query, ctx)")
        self.inner = inner
        self.name = provider_name(inner, name, agentium=True)

    def __getattr__(self, name: str) -> Any:
        # What the pass reads of a provider is the wrapped one's.
        if name in ("degradation_reason", "source_identity"):
            return getattr(self.inner, name, None)
        if name == "context_fields":
            return getattr(self.inner, name, ())
        raise AttributeError(name)

    async def provide(self, branch: Any, instruction: Any) -> Any:
        """The wrapped provider's answer (checked by the pass) to the instruction's
        text and the run context."""
        return await call_fetch(self.inner, query_from_instruction(instruction),
                                run_context_from_branch(branch))


#: :class:`LionagiProvider` under the name the docs use.
provider = LionagiProvider


#: The Branch methods that start a user call (each may make several model calls).
_ENTRIES = ("chat", "chat_and_record", "communicate", "operate", "parse", "interpret", "ReAct")
#: The ones that stream (async generators).
_STREAMS = ("ReActStream", "run")
_UNSET: Any = object()


class _Installed:
    """LionAGI's Branch registry after :func:`install`: ``gather`` runs the lionctx
    registry once per user call; everything else LionAGI reads is the registry's."""

    def __init__(self, registry: ContextProviderRegistry, run_context: Any) -> None:
        self.registry = registry
        self.run_context = run_context
        self.call: ContextVar[Once[ProviderReport] | None] = ContextVar("lionctx_lionagi_call",
                                                                       default=None)
        self.last: ContextVar[Report | None] = ContextVar("lionctx_lionagi_report", default=None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.registry, name)

    def __bool__(self) -> bool:
        return bool(self.registry)

    def __len__(self) -> int:
        return len(self.registry)

    async def gather(self, branch: Any, instruction: Any) -> ProviderReport:
        call = self.call.get()
        if call is None:  # a model call outside any Branch method: its own user call
            view = await self._pass(branch, instruction)
            self.last.set(view.report)
            return view
        return await call.get(lambda: self._pass(branch, instruction))

    async def _pass(self, branch: Any, instruction: Any) -> ProviderReport:
        # The registry's pass keeps this branch's baseline (its owner) per user.
        with bind_run_context(await host_context(self.run_context, None, branch)):
            return await self.registry.gather(branch, instruction)

    def finish(self, branch: Any, call: Once[ProviderReport]) -> None:
        if call.value is not None:
            self.last.set(call.value.report)
        elif self.registry and not getattr(getattr(branch, "msgs", None), "system", True):
            self.last.set(self.registry.skipped_report().report)  # LionAGI called nobody
        else:
            self.last.set(None)


def _installed(branch: Any) -> _Installed | None:
    found = getattr(branch, "_context_providers", None)
    return found if isinstance(found, _Installed) else None


def _entry(branch: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    async def entry(*args: Any, **kwargs: Any) -> Any:
        installed = _installed(branch)
        if installed is None or installed.call.get() is not None:  # nested: same call
            return await method(*args, **kwargs)
        call: Once[ProviderReport] = Once()
        token = installed.call.set(call)
        try:
            return await method(*args, **kwargs)
        finally:
            installed.call.reset(token)
            installed.finish(branch, call)
    return entry


def _stream(branch: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    async def entry(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        installed = _installed(branch)
        inner = method(*args, **kwargs)
        if installed is None or installed.call.get() is not None:
            async for item in inner:
                yield item
            return
        call: Once[ProviderReport] = Once()
        try:
            while True:
                # Set around each step only: the consumer's context between items is its own.
                token = installed.call.set(call)
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    installed.call.reset(token)
                yield item
        finally:
            await inner.aclose()
            installed.finish(branch, call)
    return entry


def install(branch: Any, registry: ContextProviderRegistry | None = None, *,
            run_context: Any = None, timeout: float | None = _UNSET) -> ContextProviderRegistry:
    """Make a real LionAGI ``Branch`` gather through a lionctx registry; return it.

    LionAGI calls its registry before every model call; the lionctx ``registry`` (a
    new one when ``None``) runs once per user call (``chat``, ``communicate``,
    ``operate``, ``parse``, ``interpret``, ``ReAct``, ``ReActStream``, ``run``; retries
    and rounds included) and every model call of it carries the same context.

    ``run_context``: a callable ``(branch)`` (sync or async) or a value; the bound run
    context fills what it leaves unset. ``timeout`` becomes the registry's per-provider
    timeout; left out, a registry without one gets :data:`DEFAULT_TIMEOUT` (10 s);
    ``None`` leaves the registry as it is. Installing again replaces the registry.
    """
    from ..registry import ContextProviderRegistry

    if not hasattr(branch, "_context_providers") or not callable(getattr(branch, "chat", None)):
        raise InvalidType(f"install: branch must be a lionagi.Branch, got {branch!r}")
    if registry is None:
        registry = ContextProviderRegistry()
    elif not isinstance(registry, ContextProviderRegistry):
        raise InvalidType("install: registry must be a lionctx.ContextProviderRegistry, "
                          f"got {registry!r}")
    run_context = check_run_context(run_context, "install")
    registry._pass.note_missing = True  # rows say which run-context field was missing
    if timeout is not _UNSET and timeout is not None:
        registry.timeout = timeout
    elif timeout is _UNSET and registry.timeout is None:
        registry.timeout = DEFAULT_TIMEOUT
    already = _installed(branch) is not None
    branch._context_providers = _Installed(registry, run_context)
    if not already:
        for name in (*_ENTRIES, *_STREAMS):
            if (method := getattr(branch, name, None)) is not None:
                wrap = _stream if name in _STREAMS else _entry
                # An instance attribute shadows the class's method for this branch only.
                object.__setattr__(branch, name, wrap(branch, method))
    return registry


def report(branch: Any) -> Report | None:
    """lionctx's report of the last user call made on ``branch`` from the caller's own
    task (one row per provider: status, reason, tokens, timing); ``None`` when this
    task made none or ``branch`` has no lionctx registry (see :func:`install`)."""
    installed = _installed(branch)
    return installed.last.get() if installed is not None else None


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())

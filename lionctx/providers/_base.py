"""The base of every built-in provider (``retrieve`` behind both faces); option checks."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar, cast

import anyio.lowlevel

from .._adapters import query_from_instruction, run_context_from_branch
from .._context import RunContext, coerce_run_context
from .._exceptions import InvalidType, InvalidValue
from .._log import logger_for
from .._outcome import NoText, SourceUnavailable
from .._safe_text import safe_text

__all__ = ["ContextSource", "CountedText", "PerLoop", "ProvidedText", "SourceUnavailable",
           "check_count", "check_duration", "check_name", "check_path", "known_token_count",
           "provided"]

logger = logger_for(__name__)

T = TypeVar("T")


class ProvidedText(str):
    """A provider's text marked ``cached`` / ``stale``; ``plain``: the plain ``str`` it was
    made from, whose hash (and memoized token count) Python keeps."""

    cached: bool
    stale: bool
    plain: str | None

    def __new__(cls, value: str, *, cached: bool = False, stale: bool = False) -> ProvidedText:
        obj = super().__new__(cls, value)
        obj.cached, obj.stale = cached, stale
        obj.plain = value if type(value) is str else None
        return obj


class CountedText(ProvidedText):
    """A :class:`ProvidedText` with its token count, made only by code in this process that
    counted it (text from a shared cache is counted again)."""

    token_count: int | None
    token_encoding: str | None

    def __new__(cls, value: str, *, cached: bool = False, stale: bool = False,
                token_count: int | None = None, token_encoding: str | None = None) -> CountedText:
        obj = cast(CountedText, super().__new__(cls, value, cached=cached, stale=stale))
        obj.token_count, obj.token_encoding = token_count, token_encoding
        return obj


def provided(value: str, *, cached: bool = False, stale: bool = False) -> ProvidedText:
    """``ProvidedText(value, cached=..., stale=...)``, keeping a count ``value`` carries."""
    count, encoding = getattr(value, "token_count", None), getattr(value, "token_encoding", None)
    if isinstance(count, int) and isinstance(encoding, str):
        return CountedText(value, cached=cached, stale=stale, token_count=count,
                           token_encoding=encoding)
    return ProvidedText(value, cached=cached, stale=stale)


def known_token_count(text: Any, counter: Any) -> int | None:
    """The count ``text`` carries if made with ``counter``'s encoding (of the bare text)."""
    if not issubclass(type(text), CountedText):  # its real type: a __class__ may raise
        return None
    count, encoding = text.token_count, text.token_encoding
    if type(count) is not int or count < 0 or encoding is None:
        return None
    return count if getattr(counter, "encoding_name", None) == encoding else None


class ContextSource:
    """Base class for providers that serve both faces.

    ``name``: the stable name in ``<context name="...">`` and reports.
    ``degradation_reason``: set by a call that worked only in part (files skipped, a stale
    value served), reported ``degraded``. ``last_error``: why the last call to finish
    failed, or ``None``.
    """

    name: str = ""
    #: A source whose text changes every turn; rendered after stable ones.
    volatile: bool = False
    degradation_reason: str | None = None
    last_error: str | None = None
    #: The source this provider reads, stated without secrets (see ``lionctx._scope``);
    #: ``None``: not stated, so no state about it is shared across processes.
    source_identity: str | None = None
    #: The run-context fields (snake_case) this provider's answer depends on.
    context_fields: tuple[str, ...] = ()

    #: False for a subclass that overrides ``fetch``: the faces then call its ``fetch``.
    _lionctx_retrieves: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._lionctx_retrieves = cls.fetch is ContextSource.fetch

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        """The text for ``query`` in ``ctx`` (``None``: none); subclasses implement it and
        raise :class:`SourceUnavailable` (the reason, without secrets) on failure."""
        if not type(self)._lionctx_retrieves:
            return await self.fetch(query, ctx)  # written to the fetch-only contract
        raise NotImplementedError(f"{type(self).__name__} must implement retrieve(query, ctx)")

    async def fetch(self, query: str, ctx: Any) -> str | None:
        """agentium face: the text, or ``None``, also when the source could not answer
        (the reason kept in ``last_error``; any other exception propagates).

        ``ctx`` is a RunContext, a mapping (``{"userId": "u1"}``) or an object shaped like
        one; ``None``: the run context bound with :func:`lionctx.bind_run_context`.
        """
        if type(self).retrieve is ContextSource.retrieve:  # neither implemented: no ping-pong
            raise NotImplementedError(f"{type(self).__name__} must implement retrieve(query, ctx)")
        ctx = coerce_run_context(ctx)
        try:
            text = await self.retrieve(query, ctx)
        except SourceUnavailable as exc:
            self.last_error = safe_text(exc)  # a subclass's message is anyone's text
            logger.warning("context provider %r got no text: %s", self.name, self.last_error)
            return None
        return None if isinstance(text, NoText) else text  # no text is None here

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        """LionAGI face: ``retrieve`` with the instruction's text as the query (a failure
        raises :class:`SourceUnavailable`, reported ``failed`` with its reason)."""
        ctx: RunContext = run_context_from_branch(branch)
        query = query_from_instruction(instruction)
        if type(self)._lionctx_retrieves:
            return await self.retrieve(query, ctx)
        return await self.fetch(query, ctx)

    def _unavailable(self, reason: str, scope: str | None = None) -> SourceUnavailable:
        """Record ``reason`` as this call's failure; return the exception to raise."""
        reason = safe_text(reason)  # it often quotes what the source said
        self.last_error = reason
        self.degradation_reason = None  # an outright failure is not a partial success
        logger.debug("context provider %r could not answer: %s", self.name, reason)
        return SourceUnavailable(reason, scope=scope)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class PerLoop(Generic[T]):
    """One object per event loop (a client belongs to the loop that made it)."""

    def __init__(self) -> None:
        self.value: T | None = None
        self._token: object = None

    def get(self, make: Callable[[], T]) -> T:
        """This loop's object, made on first use in a loop."""
        token = anyio.lowlevel.current_token()
        if self.value is None or self._token != token:
            self.value, self._token = make(), token
        return self.value

    def take(self) -> T | None:
        """Forget the object; return it if this loop made it (to close it)."""
        value, token, self.value, self._token = self.value, self._token, None, None
        return value if token == anyio.lowlevel.current_token() else None


# Option checks: each names the option and the bad value.

def check_name(value: Any, label: str = "name") -> str:
    """A provider name: a non-empty ``str``."""
    if not isinstance(value, str) or not value:
        raise InvalidValue(f"{label} must be a non-empty str, got {value!r}")
    return value


def check_count(value: Any, label: str, minimum: int) -> int:
    """An ``int`` (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{label} must be an int, got {value!r}")
    if value < minimum:
        raise InvalidValue(f"{label} must be >= {minimum}, got {value!r}")
    return value


def check_duration(value: Any, label: str, *, allow_zero: bool, unit: str = "seconds") -> float:
    """A finite number of ``unit``, positive (or zero when allowed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(f"{label} must be a number of {unit}, got {value!r}")
    if math.isnan(value) or math.isinf(value) or value < 0 or (value == 0 and not allow_zero):
        need = "zero or a positive" if allow_zero else "a positive"
        raise InvalidValue(f"{label} must be {need}, finite number of {unit}, got {value!r}")
    return float(value)


def check_path(value: Any, label: str) -> str:
    """A non-empty filesystem path (``str`` or path-like) without NUL characters."""
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidType(f"{label} must be a str or path, got {value!r}")
    raw: str | bytes = os.fspath(value)
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        raise InvalidValue(f"{label} must be a non-empty path without NUL, got {value!r}")
    return raw

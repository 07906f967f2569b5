"""Unknown option names, refused with the closest known name ("did you mean")."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, ParamSpec, TypeVar

from ._exceptions import InvalidType

__all__ = ["checked_keywords", "closest", "did_you_mean", "unknown_option"]

P = ParamSpec("P")
R = TypeVar("R")


def _folded(name: str) -> str:
    # contextProvider, context_provider and ContextProviders compare alike.
    return name.replace("_", "").lower()


def closest(key: str, known: Iterable[str]) -> str | None:
    """The known name ``key`` most likely meant, or ``None``; of two spellings, the one
    in the caller's style (snake_case when ``key`` has an underscore)."""
    snake = "_" in key
    by_fold: dict[str, str] = {}
    for name in sorted(k for k in known if isinstance(k, str)):
        folded = _folded(name)
        held = by_fold.get(folded)
        if held is None or (("_" in name) == snake and ("_" in held) != snake):
            by_fold[folded] = name
    if (folded := _folded(key)) in by_fold:
        return by_fold[folded]
    match = difflib.get_close_matches(folded, list(by_fold), n=1, cutoff=0.75)
    return by_fold[match[0]] if match else None


def did_you_mean(key: object, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` when a known name is close to ``key``, else ``""``."""
    hint = closest(key, known) if isinstance(key, str) else None
    return f"; did you mean {hint!r}?" if hint is not None else ""


def unknown_option(owner: str, key: object, known: Iterable[str]) -> InvalidType:
    """The error for an option ``owner`` does not take, with a "did you mean"."""
    return InvalidType(f"{owner} got an unknown option {key!r}{did_you_mean(key, known)}")


def checked_keywords(
    fn: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """Refuse an unknown keyword of the ``async`` function ``fn`` before it runs."""
    params = inspect.signature(fn).parameters
    known = frozenset(name for name, p in params.items()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    owner = f"{fn.__name__}()"

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        for key in kwargs:
            if key not in known:
                raise unknown_option(owner, key, known)
        return await fn(*args, **kwargs)

    return wrapper

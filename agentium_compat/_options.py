"""``Agent({...})``: agentium's constructor takes one options object."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from lionctx import InvalidType
from lionctx._suggest import unknown_option  # extension: the core's "did you mean" errors

from ._context import camel, snake

__all__ = ["accepts_options_mapping"]

T = TypeVar("T", bound=type)
#: Option names kept as spelled (the constructor takes them in this spelling).
_AS_IS = frozenset({"contextProviders"})


def accepts_options_mapping(cls: T) -> T:
    """Let ``cls(options_mapping)`` mean ``cls(**options)``, camelCase keys included
    (as keywords too), beside keywords. A key given twice, not a ``str``, or unknown
    (with the closest known option) raises ``TypeError`` naming it."""
    init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    accepted = frozenset(inspect.signature(init).parameters) - {"self"}
    # What an error may suggest: each option in both spellings.
    spelled = accepted | {camel(name) for name in accepted}

    @functools.wraps(init)
    def __init__(self: Any, options: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        if options is not None and not isinstance(options, Mapping):
            raise InvalidType(f"{cls.__name__}() takes an options mapping or keywords, "
                              f"got {type(options).__name__}")
        merged: dict[str, Any] = {}
        spelled_as: dict[str, str] = {}
        for key, value in [*(options or {}).items(), *kwargs.items()]:
            if not isinstance(key, str):
                raise InvalidType(f"{cls.__name__} option names must be str, got {key!r}")
            name = key if key in accepted or key in _AS_IS else snake(key)
            if name not in accepted:
                raise unknown_option(cls.__name__, key, spelled)
            if name in merged:
                raise InvalidType(f"{cls.__name__} option {spelled_as[name]!r} given twice "
                                  f"(also as {key!r})")
            merged[name] = value
            spelled_as[name] = key
        init(self, **merged)

    cls.__init__ = __init__  # type: ignore[misc]
    return cls

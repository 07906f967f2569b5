"""agentium's options objects (``Agent({...})``, ``openai(model, {...})``, a provider's
``{...}``, ``agent.run(input, {...})``): one reader, each boundary in its own words."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from lionctx import InvalidType
from lionctx._suggest import did_you_mean  # extension: the core's "did you mean" hints

from ._context import camel, snake

__all__ = ["Words", "accepts_options_mapping", "read_options"]

T = TypeVar("T", bound=type)


class Words(NamedTuple):
    """One boundary's error texts, formatted with ``type``/``value`` (the options given),
    ``key`` and ``hint`` (an unknown option), ``first`` and ``name`` (one given twice)."""

    not_mapping: str
    unknown: str
    twice: str
    not_str: str | None = None  # a key that is no str (else: unknown)


def read_options(words: Words, options: Any, keywords: Mapping[str, Any],
                 known: Mapping[str, str],
                 name_of: Callable[[str], str | None] | None = None) -> dict[str, Any]:
    """``options`` (a mapping or ``None``) then ``keywords`` as ``{name: value}``, each key
    a spelling in ``known`` (``name_of`` maps it when given); a key that is no option, or
    names one already given, is refused with ``words``."""
    if options is not None and not isinstance(options, Mapping):
        raise InvalidType(words.not_mapping.format(type=type(options).__name__, value=options))
    agentium = {name: key for key, name in known.items() if key != name}
    merged: dict[str, Any] = {}
    spelled_as: dict[str, str] = {}
    for key, value in [*(options or {}).items(), *keywords.items()]:
        if not isinstance(key, str) and words.not_str is not None:
            raise InvalidType(words.not_str.format(key=key))
        name = (name_of or known.get)(key) if isinstance(key, str) else None
        if name is None:
            hint = (f" (agentium spells it {agentium[key]!r})" if key in agentium
                    else did_you_mean(key, known))
            raise InvalidType(words.unknown.format(key=key, hint=hint))
        if name in merged:
            raise InvalidType(words.twice.format(first=spelled_as[name], key=key, name=name))
        merged[name] = value
        spelled_as[name] = key
    return merged


def accepts_options_mapping(cls: T) -> T:
    """Let ``cls(options_mapping)`` mean ``cls(**options)`` (camelCase keys too); a key
    given twice, not a ``str``, or unknown raises ``TypeError`` naming it."""
    init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    accepted = frozenset(inspect.signature(init).parameters) - {"self"}
    known = {spelling: name for name in accepted for spelling in (name, camel(name))}
    owner = cls.__name__
    words = Words(f"{owner}() takes an options mapping or keywords, got {{type}}",
                  f"{owner} got an unknown option {{key!r}}{{hint}}",
                  f"{owner} option {{first!r}} given twice (also as {{key!r}})",
                  f"{owner} option names must be str, got {{key!r}}")

    def name_of(key: str) -> str | None:
        return key if key in accepted else snake(key) if snake(key) in accepted else None

    @functools.wraps(init)
    def __init__(self: Any, options: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        init(self, **read_options(words, options, kwargs, known, name_of))

    cls.__init__ = __init__  # type: ignore[misc]
    return cls

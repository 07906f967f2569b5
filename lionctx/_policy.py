"""The knobs every pass shares (:class:`Policy`), and one validator per knob: a bad
value is refused where it is set, naming it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast, overload

from ._exceptions import InvalidType, InvalidValue
from ._types import Number

__all__ = ["Policy", "check_count", "check_counter", "check_limit", "check_max_chars",
           "check_number", "check_observer", "check_seconds"]


def check_seconds(value: Any, label: str) -> float | None:
    """An optional positive, finite number of seconds; name ``label`` if not."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(f"{label} must be a number of seconds or None, got {value!r}")
    if not value > 0 or math.isinf(value):
        raise InvalidValue(f"{label} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def check_count(value: Any, label: str) -> int:
    """An ``int >= 1`` (a threshold, a bound); anything else is an :class:`InvalidValue`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidValue(f"{label} must be an int >= 1, got {value!r}")
    return value


def check_limit(value: Any, label: str = "limit", what: str = "a positive int") -> int | None:
    """An optional positive int (a concurrency limit, a size limit), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{label} must be {what} or None, got {value!r}")
    if value < 1:
        raise InvalidValue(f"{label} must be {what} or None, got {value!r}")
    return value


def check_max_chars(value: Any, label: str = "max_chars") -> int | None:
    """An optional size limit: a positive int of characters, or None."""
    return check_limit(value, label, "a positive int (characters)")


@overload
def check_number(value: Any, label: str, *, allow_none: Literal[False]) -> Number: ...
@overload
def check_number(value: Any, label: str, *, allow_none: bool) -> Number | None: ...
def check_number(value: Any, label: str, *, allow_none: bool) -> Number | None:
    """A number (not a bool, not NaN), or None where ``allow_none``."""
    if value is None and allow_none:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and math.isnan(value))):
        expected = "a number or None" if allow_none else "a number"
        raise InvalidType(f"{label} must be {expected}, got {value!r}")
    return value


def check_counter(value: Any, label: str = "counter") -> Any:
    """None (the bundled ``o200k_base``), a tiktoken encoding name, or ``str -> int``."""
    if value is not None and not isinstance(value, str) and not callable(value):
        raise InvalidType(f"{label} must be None, a tiktoken encoding name or a callable "
                          f"str -> int, got {value!r}")
    return value


def check_observer(value: Any, label: str = "on_outcome") -> Callable[..., Any] | None:
    """None or a callable that takes an outcome."""
    if value is not None and not callable(value):
        raise InvalidType(f"{label} must be callable or None, got {value!r}")
    return cast("Callable[..., Any] | None", value)


@dataclass(frozen=True, slots=True)
class Policy:
    """The shared knobs of a pass, checked when built (``replace`` checks again)."""

    timeout: float | None = None
    deadline: float | None = None
    limit: int | None = None
    counter: Any = None
    observer: Callable[..., Any] | None = None
    max_chars: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "timeout", check_seconds(self.timeout, "timeout"))
        set_(self, "deadline", check_seconds(self.deadline, "deadline"))
        set_(self, "limit", check_limit(self.limit))
        set_(self, "counter", check_counter(self.counter))
        set_(self, "observer", check_observer(self.observer))
        set_(self, "max_chars", check_max_chars(self.max_chars))

    def replace(self, **changes: Any) -> Policy:
        """A copy with ``changes``, checked like a new one."""
        return dataclasses.replace(self, **changes)

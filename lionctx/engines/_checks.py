"""What a host checks in whatever a context engine returns. Pure functions.

An engine's result is never trusted to describe itself: :func:`plain` rebuilds it
from the built-in types' own storage (``list``, ``dict``, ``str``, ``int``,
``float``, ``bool``, ``None``; tuples become lists), so a subclass whose ``get``,
``__getitem__``, ``__iter__``, ``strip`` or ``__eq__`` lies is judged, and sent, as
what it really holds. On that plain copy: the shape of a message list
(:func:`shape_problem`), system authority (:func:`authority_problem`: a selection or
compaction may not add a ``system``/``developer`` message beyond the original system
prefix or change that prefix), tool-call pairing (:func:`tool_pairing_problems`),
message identity across a compaction (:func:`carry_identity`) and tool schemas
(:func:`function_spec`). The hook calls that use these live in :mod:`.host`.
"""

from __future__ import annotations

import copy
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ._base import usage_counts
from ._identity import PERSISTENCE_ONLY_FIELDS, UID_FIELD, is_uid, new_uid

__all__ = [
    "authority_problem",
    "carry_identity",
    "checked_selection",
    "compaction_problem",
    "function_spec",
    "plain",
    "plain_messages",
    "role_of",
    "schema_name",
    "selection_problem",
    "shape_problem",
    "tool_pairing_problems",
    "usage_dict",
]

# The host's logger: these lines read as the host's, as before the split.
logger = logging.getLogger("lionctx.engines.host")

_SYSTEM_ROLES = frozenset({"system", "developer"})
_KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


class _NotPlain(ValueError):
    """A value an engine returned that is not plain JSON data."""


def plain(value: Any) -> Any:
    """``value`` rebuilt from built-in types only, read from their own storage.

    Subclasses of ``str``, ``int``, ``float``, ``list``, ``tuple`` and ``dict`` are
    copied through the base type's methods (never their own, which may lie);
    tuples become lists. Raises :class:`_NotPlain` for anything else, and
    RecursionError for a cycle.
    """
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int or kind is float:
        return value
    if issubclass(kind, dict):
        out: dict[Any, Any] = {}
        for key, item in dict.items(value):
            out[plain_key(key)] = plain(item)
        return out
    if issubclass(kind, list):
        return [plain(item) for item in list.copy(value)]
    if issubclass(kind, tuple):
        return [plain(item) for item in tuple.__getitem__(value, slice(None))]
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int) and kind is not bool:
        return int.__index__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    raise _NotPlain(f"a {kind.__name__}, which is not JSON data")


def plain_key(key: Any) -> Any:
    kind = type(key)
    if key is None or kind is str or kind is bool or kind is int or kind is float:
        return key
    if issubclass(kind, str):
        return str.__str__(key)
    if issubclass(kind, int):
        return int.__index__(key)
    if issubclass(kind, float):
        return float.__float__(key)
    raise _NotPlain(f"a key of type {kind.__name__}, which is not JSON data")


def plain_messages(result: object) -> object:
    """A list result as plain data (see :func:`plain`); other results as they are,
    for :func:`shape_problem` to name. Raises :class:`_NotPlain` naming the index."""
    # By the real type: a __class__ that lies is not trusted (isinstance alone would be;
    # it is true whenever the real type is a list, so it only narrows here).
    if not issubclass(type(result), list) or not isinstance(result, list):
        return result
    items = list.copy(result)
    out: list[Any] = []
    for index, message in enumerate(items):
        if not issubclass(type(message), dict):
            out.append(message)
            continue
        try:
            out.append(plain(message))
        except _NotPlain as exc:
            raise _NotPlain(f"returned a message holding {exc} at index {index}") from None
    return out


def role_of(message: Mapping[str, Any]) -> str | None:
    # Engine results are plain copies by now; dict.get and exact str keep a
    # Mapping or str subclass from answering for itself anyway.
    role = dict.get(message, "role") if type(message) is dict else message.get("role")
    return role.strip().lower() if type(role) is str else None


def system_view(message: Mapping[str, Any]) -> tuple[str | None, str, Any]:
    """What makes two system messages the same instruction: role, content, name."""
    content = json.dumps(message.get("content"), sort_keys=True, default=repr)
    return role_of(message), content, message.get("name")


def system_prefix_len(messages: Sequence[Mapping[str, Any]]) -> int:
    n = 0
    for message in messages:
        if role_of(message) not in _SYSTEM_ROLES:
            break
        n += 1
    return n


def authority_problem(
    original: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why ``candidate`` gains system authority over ``original``, or None.

    The candidate must start with exactly the original leading system messages; any
    other system message in it must be one the original already had after its prefix
    (keeping, moving or dropping those is fine; repeating one is not).
    """
    n_orig = system_prefix_len(original)
    n_cand = system_prefix_len(candidate)
    orig_prefix = [system_view(m) for m in original[:n_orig]]
    if n_cand < n_orig or [system_view(m) for m in candidate[:n_orig]] != orig_prefix:
        return (
            f"changes the system prefix ({n_orig} original system message(s), "
            f"{n_cand} returned)"
        )
    allowed = Counter(
        system_view(m) for m in original[n_orig:] if role_of(m) in _SYSTEM_ROLES
    )
    for index in range(n_orig, len(candidate)):
        message = candidate[index]
        if role_of(message) in _SYSTEM_ROLES:
            key = system_view(message)
            if allowed[key] <= 0:
                return f"adds a {role_of(message)} message at index {index}"
            allowed[key] -= 1
    return None


def shape_problem(result: object) -> str | None:
    """Why ``result`` (a plain copy) is not a usable message list, or None."""
    if type(result) is not list:
        return f"returned {type(result).__name__}, not a list"
    if not result:
        return "returned an empty list"
    for index, message in enumerate(result):
        if type(message) is not dict:
            return f"returned a {type(message).__name__} at index {index}, not a dict"
        role = role_of(message)
        if role not in _KNOWN_ROLES:
            return f"returned a message with role {message.get('role')!r} at index {index}"
    return None


def checked_selection(
    original: Sequence[Mapping[str, Any]], result: object
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(plain copy of ``result``, why it may not replace ``original`` or None)."""
    try:
        plain = plain_messages(result)
    except _NotPlain as exc:
        return None, str(exc)
    problem = shape_problem(plain)
    if problem is None:
        problem = authority_problem(original, plain)  # type: ignore[arg-type]
    return (plain if problem is None else None), problem  # type: ignore[return-value]


def selection_problem(
    original: Sequence[Mapping[str, Any]], result: object
) -> str | None:
    """Why ``result`` may not replace ``original`` as a request, or None if it may.

    Refused: a non-list, an empty list, a list holding a non-dict or a message with
    a missing or unknown role, a value that is not JSON data, and any result that
    adds a system message beyond the original system prefix or changes that prefix.
    The result is judged by what it holds (see the module docs), not by what its
    methods say.
    """
    return checked_selection(original, result)[1]


def tool_pairing_problems(messages: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """Tool-call pairing faults in an OpenAI message list.

    ``("orphan_result", id)``: a ``tool`` message not directly preceded by the
    assistant call it answers (its group). ``("unanswered_call", id)``: an assistant
    tool call whose result does not follow it. An empty set means every call sits
    with its results.
    """
    problems: set[tuple[str, str]] = set()
    open_ids: set[str] | None = None
    answered: set[str] = set()

    def close() -> None:
        if open_ids:
            for call_id in open_ids - answered:
                problems.add(("unanswered_call", call_id))

    for message in messages:
        role = role_of(message)
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if open_ids is None or call_id not in open_ids:
                problems.add(("orphan_result", call_id))
            else:
                answered.add(call_id)
            continue
        close()
        open_ids = None
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            open_ids = {
                str(call.get("id")) if isinstance(call, Mapping) else repr(call)
                for call in calls
            }
            answered = set()
    close()
    return problems


def usage_dict(usage: Any) -> dict[str, Any] | None:
    """A plain-dict copy of a usage dict or usage object, or None."""
    if usage is None:
        return None
    if isinstance(usage, Mapping):
        return copy.deepcopy(dict(usage))
    dump = getattr(usage, "model_dump", None)
    if callable(dump):
        try:
            dumped = dump()
        except Exception:
            dumped = None
        if isinstance(dumped, dict):
            return dumped
    counts = usage_counts(usage)
    if counts is None:
        return None
    prompt, completion, total = counts
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def wire_key(message: Mapping[str, Any]) -> str | None:
    """The message as a provider sees it, for matching copies of one message.

    None when the message cannot be serialized (mixed key types, cycles): such a row
    matches nothing and is treated as new.
    """
    view = {k: v for k, v in message.items() if k not in PERSISTENCE_ONLY_FIELDS}
    try:
        return json.dumps(view, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None



def carry_identity(
    original: Sequence[Mapping[str, Any]], result: list[dict[str, Any]], mint: bool
) -> None:
    """Keep ``message_uid`` rules on a compacted history, in place.

    An engine-set valid uid is kept. A row that dropped its uid but is an unchanged
    copy of an original message gets that message's uid (and tool-call uids) back; a
    row that is new gets a fresh uid when ``mint`` is true (rows are minted at insert).
    """
    by_key: dict[str | None, list[Mapping[str, Any]]] = {}
    for message in original:
        if is_uid(message.get(UID_FIELD)):
            key = wire_key(message)
            if key is not None:
                by_key.setdefault(key, []).append(message)
    taken = {m[UID_FIELD] for m in result if is_uid(m.get(UID_FIELD))}
    for message in result:
        if is_uid(message.get(UID_FIELD)):
            continue
        if UID_FIELD in message:
            logger.debug("replacing malformed message_uid %r", message[UID_FIELD])
            del message[UID_FIELD]
        key = wire_key(message)
        for source in by_key.get(key, ()) if key is not None else ():
            if source[UID_FIELD] not in taken:
                for field in PERSISTENCE_ONLY_FIELDS:
                    if field in source and field not in message:
                        message[field] = copy.deepcopy(source[field])
                taken.add(source[UID_FIELD])
                break
        else:
            if mint:
                message[UID_FIELD] = new_uid()



def compaction_problem(
    original: list[dict[str, Any]], result: object
) -> str | None:
    """Why ``result`` (a plain copy) may not replace ``original``; ``""`` when it
    equals it."""
    if type(result) is list and result == original:
        return ""
    problem = (shape_problem(result)
               or authority_problem(original, result))  # type: ignore[arg-type]
    if problem is None:
        introduced = (tool_pairing_problems(result)  # type: ignore[arg-type]
                      - tool_pairing_problems(original))
        if introduced:
            kind, call_id = sorted(introduced)[0]
            problem = f"breaks a tool call / result pair ({kind} {call_id!r})"
    return problem



def schema_name(schema: object) -> str:
    """A tool schema's name for a log line; never raises."""
    try:
        if isinstance(schema, Mapping):
            inner = schema.get("function")
            name = (inner if isinstance(inner, Mapping) else schema).get("name")
            if isinstance(name, str):
                return repr(str.__str__(name))
    except Exception:
        pass
    return "unnamed"


def function_spec(schema: object) -> dict[str, Any] | None:
    """One engine tool schema as an OpenAI ``function`` object; None without a name."""
    schema = plain(schema)  # judged by what it holds; raises _NotPlain if not data
    spec = schema
    if isinstance(schema, Mapping) and schema.get("type") == "function":
        spec = schema.get("function")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or not spec["name"]:
        return None
    function: dict[str, Any] = {"name": spec["name"]}
    if spec.get("description") is not None:
        function["description"] = str(spec["description"])
    parameters = spec.get("parameters")
    function["parameters"] = (
        copy.deepcopy(dict(parameters))
        if isinstance(parameters, Mapping)
        else {"type": "object", "properties": {}}
    )
    return function


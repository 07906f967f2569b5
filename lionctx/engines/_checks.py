"""What a host checks in whatever a context engine returns (judged as what it really
holds; it may not add to or change the system prefix), and message identity. Pure."""

from __future__ import annotations

import contextlib
import copy
import json
from collections import Counter
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from .._log import logger_for
from .._messages import PERSISTENCE_ONLY_FIELDS, is_uid, new_uid
from .._safe_text import type_name
from ._base import usage_counts

__all__ = ["ABSORBED_UIDS_FIELD", "UID_FIELD", "authority_problem", "carry_identity",
           "function_spec", "message_uid", "plain", "plain_messages", "record_merge", "role_of",
           "schema_name", "shape_problem", "tool_pairing_problems", "usage_dict", "vetted"]

logger = logger_for("lionctx.engines._host")  # these lines read as the host's

UID_FIELD = "message_uid"
ABSORBED_UIDS_FIELD = "_absorbed_message_uids"
SYSTEM_ROLES = frozenset({"system", "developer"})
_KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


class _NotPlain(ValueError):
    """What an engine returned is not a list of plain JSON messages."""


def plain(value: Any, *, key: bool = False) -> Any:
    """``value`` rebuilt from built-in types through the base types' methods (never a
    subclass's own); else :class:`_NotPlain` (``key``: a dict key), RecursionError."""
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int or kind is float:
        return value
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int):
        return int.__index__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    if not key and issubclass(kind, dict):
        return {plain(k, key=True): plain(item) for k, item in dict.items(value)}
    if not key and issubclass(kind, list):
        return [plain(item) for item in list.copy(value)]
    if not key and issubclass(kind, tuple):
        return [plain(item) for item in tuple.__getitem__(value, slice(None))]
    what = "a key of type " if key else "a "
    raise _NotPlain(f"{what}{kind.__name__}, which is not JSON data")


def plain_messages(result: object) -> list[dict[str, Any]]:
    """``result`` as a list of plain dicts (:func:`plain`); else :class:`_NotPlain` says why."""
    # By the real type: a __class__ that lies is not trusted.
    if not issubclass(type(result), list) or not isinstance(result, list):
        raise _NotPlain(f"returned {type(result).__name__}, not a list")
    out: list[dict[str, Any]] = []
    for index, message in enumerate(list.copy(result)):
        if not issubclass(type(message), dict):
            raise _NotPlain(f"returned a {type(message).__name__} at index {index}, not a dict")
        try:
            out.append(plain(message))
        except _NotPlain as exc:
            raise _NotPlain(f"returned a message holding {exc} at index {index}") from None
    return out


def role_of(message: Mapping[str, Any]) -> str | None:
    """The message's role, stripped and lower-cased; None when it has no string role."""
    # dict.get and str's own methods: a Mapping or str subclass cannot answer for itself.
    role = dict.get(message, "role") if type(message) is dict else message.get("role")
    return str.lower(str.strip(role)) if isinstance(role, str) else None


def system_prefix_len(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many leading messages are system/developer messages."""
    return next((n for n, m in enumerate(messages) if role_of(m) not in SYSTEM_ROLES),
                len(messages))


def _system_view(message: Mapping[str, Any]) -> tuple[str | None, str, Any]:
    """What makes two system messages the same instruction: role, content, name."""
    content = json.dumps(message.get("content"), sort_keys=True, default=repr)
    return role_of(message), content, message.get("name")


def authority_problem(original: Sequence[Mapping[str, Any]],
                      candidate: Sequence[Mapping[str, Any]]) -> str | None:
    """Why ``candidate`` gains system authority over ``original``, or None: it keeps the
    system prefix, and a later system message is one the original had there, not repeated."""
    n_orig = system_prefix_len(original)
    n_cand = system_prefix_len(candidate)
    orig_prefix = [_system_view(m) for m in original[:n_orig]]
    if n_cand < n_orig or [_system_view(m) for m in candidate[:n_orig]] != orig_prefix:
        return f"changes the system prefix ({n_orig} original system message(s), {n_cand} returned)"
    allowed = Counter(_system_view(m) for m in original[n_orig:] if role_of(m) in SYSTEM_ROLES)
    for index, message in enumerate(candidate[n_orig:], n_orig):
        if role_of(message) in SYSTEM_ROLES:
            key = _system_view(message)
            if allowed[key] <= 0:
                return f"adds a {role_of(message)} message at index {index}"
            allowed[key] -= 1
    return None


def shape_problem(result: list[dict[str, Any]]) -> str | None:
    """Why ``result`` (a plain copy) is not a usable message list, or None."""
    if not result:
        return "returned an empty list"
    for index, message in enumerate(result):
        if role_of(message) not in _KNOWN_ROLES:
            return f"returned a message with role {message.get('role')!r} at index {index}"
    return None


def vetted(original: Sequence[Mapping[str, Any]], result: object, *,
           compaction: bool = False) -> tuple[list[dict[str, Any]] | None, str | None]:
    """``(plain copy of result, None)`` when it may replace ``original``, else ``(None, why)``;
    a ``compaction`` may not break a tool call / result pair, and one changing nothing is
    ``(None, "")``."""
    try:
        copied = plain_messages(result)
        if compaction and copied == original:
            return None, ""
        problem = shape_problem(copied) or authority_problem(original, copied)
        if problem is None and compaction:
            introduced = tool_pairing_problems(copied) - tool_pairing_problems(original)
            if introduced:
                kind, call_id = sorted(introduced)[0]
                problem = f"breaks a tool call / result pair ({kind} {call_id!r})"
    except _NotPlain as exc:
        return None, str(exc)
    except Exception as exc:  # a list we cannot even inspect is refused
        return None, f"returned messages that cannot be checked ({type_name(exc)})"
    return (copied if problem is None else None), problem


def tool_pairing_problems(messages: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """``("orphan_result", id)`` for a tool message not right after its call,
    ``("unanswered_call", id)`` for a call whose result does not follow it."""
    problems: set[tuple[str, str]] = set()
    calls: set[str] = set()  # the ids the tool messages here may answer
    answered: set[str] = set()
    for message in messages:
        role = role_of(message)
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id in calls:
                answered.add(call_id)
            else:
                problems.add(("orphan_result", call_id))
            continue
        problems.update(("unanswered_call", call_id) for call_id in calls - answered)
        made = message.get("tool_calls") if role == "assistant" else None
        calls = {str(call.get("id")) if isinstance(call, Mapping) else repr(call)
                 for call in made or ()}
        answered = set()
    problems.update(("unanswered_call", call_id) for call_id in calls - answered)
    return problems


def usage_dict(usage: Any) -> dict[str, Any] | None:
    """A plain-dict copy of a usage dict or usage object, or None."""
    if isinstance(usage, Mapping):
        return copy.deepcopy(dict(usage))
    with contextlib.suppress(Exception):  # no model_dump, or a broken one
        if isinstance(dumped := usage.model_dump(), dict):
            return dumped
    counts = usage_counts(usage)
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    return dict(zip(keys, counts, strict=True)) if counts is not None else None


def schema_name(schema: object) -> str:
    """A tool schema's name for a log line; never raises."""
    with contextlib.suppress(Exception):
        if isinstance(schema, Mapping):
            inner = schema.get("function")
            name = (inner if isinstance(inner, Mapping) else schema).get("name")
            if isinstance(name, str):
                return repr(str.__str__(name))
    return "unnamed"


def function_spec(schema: object) -> dict[str, Any] | None:
    """One engine tool schema as an OpenAI ``function`` object; None without a name."""
    spec = plain(schema)  # a fresh copy, judged by what it holds; _NotPlain if not data
    if isinstance(spec, dict) and spec.get("type") == "function":
        spec = spec.get("function")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        return None
    function: dict[str, Any] = {"name": spec["name"]}
    if spec.get("description") is not None:
        function["description"] = str(spec["description"])
    parameters = spec.get("parameters")
    function["parameters"] = (parameters if isinstance(parameters, dict)
                              else {"type": "object", "properties": {}})
    return function


# -- message identity -------------------------------------------------------------------

def message_uid(message: Mapping[str, Any]) -> str | None:
    """The message's uid, or ``None`` when it has none yet (not stored yet)."""
    value = message.get(UID_FIELD)
    return value if is_uid(value) else None


def record_merge(survivor: MutableMapping[str, Any],
                 absorbed: Iterable[Mapping[str, Any]]) -> MutableMapping[str, Any]:
    """Append the uids of ``absorbed`` (and what they absorbed) to ``survivor``'s absorbed
    uids, without repeats; ``survivor`` keeps its own uid. Returns ``survivor``."""
    recorded: list[str] = [u for u in survivor.get(ABSORBED_UIDS_FIELD) or () if is_uid(u)]
    own = message_uid(survivor)
    for part in absorbed:
        for uid in (message_uid(part), *(part.get(ABSORBED_UIDS_FIELD) or ())):
            if is_uid(uid) and uid != own and uid not in recorded:
                recorded.append(uid)
    if recorded:
        survivor[ABSORBED_UIDS_FIELD] = recorded
    return survivor


def _wire_key(message: Mapping[str, Any]) -> str | None:
    """The message as a provider sees it; None when it cannot be serialized."""
    view = {k: v for k, v in message.items() if k not in PERSISTENCE_ONLY_FIELDS}
    try:
        return json.dumps(view, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None


def carry_identity(original: Sequence[Mapping[str, Any]], result: list[dict[str, Any]]) -> None:
    """In place: an engine-set uid is kept, an unchanged copy of an original message gets
    its uids back, a new row a fresh uid."""
    by_key: dict[str | None, list[Mapping[str, Any]]] = {}
    for message in original:
        if is_uid(message.get(UID_FIELD)):
            if (key := _wire_key(message)) is not None:
                by_key.setdefault(key, []).append(message)
    taken = {m[UID_FIELD] for m in result if is_uid(m.get(UID_FIELD))}
    for message in result:
        if is_uid(message.get(UID_FIELD)):
            continue
        if UID_FIELD in message:
            logger.debug("replacing malformed message_uid %r", message[UID_FIELD])
            del message[UID_FIELD]
        for source in by_key.get(_wire_key(message), ()):  # None (unserializable): no key
            if source[UID_FIELD] not in taken:
                for field in PERSISTENCE_ONLY_FIELDS:
                    if field in source and field not in message:
                        message[field] = copy.deepcopy(source[field])
                taken.add(source[UID_FIELD])
                break
        else:
            message[UID_FIELD] = new_uid()

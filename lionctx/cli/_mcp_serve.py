"""``lionctx mcp serve``: the sources of a config file, served to any MCP host.

Each configured source (filesystem, HTTP, SQLite, MCP) is one MCP resource,
``lionctx://sources/<name>``: reading it resolves that source alone, under the
config's timeout, and returns its tagged block (``<context name="...">``, escaped as
every block lionctx renders), or an error with the source's reason. One MCP prompt,
``context``, takes a ``query`` argument and returns the resolved, budgeted, tagged
context of every source for that query, followed by the report summary (one row per
source and the budget line), as ``lionctx resolve`` prints it.

The run context is the config's ``user`` and ``tenant``; a request may carry its own
in ``_meta`` (``user_id``, ``tenant_id``, ``session_id``, strings), which the host
decides: the server runs on stdio or on a local address only, as the user's own tool.

Stdout is the protocol channel on stdio: nothing else is written to it.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from ._sources import UsageError

__all__ = ["SOURCE_PREFIX", "add_mcp_parser", "cmd_mcp_serve", "parse_listen"]

SOURCE_PREFIX = "lionctx://sources/"
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
_META_FIELDS = ("user_id", "tenant_id", "session_id")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` on a local address; a :class:`UsageError` naming it otherwise."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"--http must be HOST:PORT, got {text!r}")
    if host not in _LOCAL_HOSTS:
        raise UsageError(f"--http must be a local address ({', '.join(_LOCAL_HOSTS)}), "
                         f"got {host!r}")
    return host, int(port_text)


def _plan(config: str) -> Any:
    from ._resolve import make_plan

    args = argparse.Namespace(config=config, sources=None, face=None, budget=None,
                              timeout=None, deadline=None, concurrent=None, query=None,
                              user=None, tenant=None, format="text", color="never", turns=1)
    return make_plan(args)


def _with_meta(plan: Any, meta: Any) -> Any:
    """The plan with the run context a request's ``_meta`` carries, where it does."""
    if meta is None:
        return plan
    changes: dict[str, Any] = {}
    for field, attr in (("user_id", "user"), ("tenant_id", "tenant")):
        value = meta.get(field) if isinstance(meta, dict) else getattr(meta, field, None)
        if isinstance(value, str) and value:
            changes[attr] = value
    return dataclasses.replace(plan, **changes) if changes else plan


def build_server(plan: Any, providers: list[Any]) -> Any:
    """The MCP server (the SDK's low-level ``Server``) over ``providers``."""
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    from ._resolve import run_plan
    from ._terminal import Style

    by_uri = {f"{SOURCE_PREFIX}{spec.name}": (spec, provider)
              for spec, provider in zip(plan.specs, providers, strict=True)}

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=uri, name=str(spec.name), mime_type="text/plain",
                           description=f"the {spec.kind} source {spec.name!r}, resolved "
                                       f"by lionctx")
            for uri, (spec, _) in by_uri.items()])

    async def read_resource(ctx: Any, params: Any) -> types.ReadResourceResult:
        found = by_uri.get(str(params.uri))
        if found is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no such source: {params.uri}")
        spec, provider = found
        one = dataclasses.replace(_with_meta(plan, ctx.meta), specs=[spec], query="")
        result = await run_plan(one, [provider])
        outcome = result.report.outcomes[0]
        if not result.context:
            reason = outcome.reason or outcome.error or outcome.status.value
            raise MCPError(code=types.INTERNAL_ERROR,
                           message=f"source {spec.name!r} {outcome.status.value}: {reason}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), mime_type="text/plain", text=result.context)])

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(
            name="context",
            description="lionctx's pre-turn context for a query: every source, resolved, "
                        "budgeted and tagged, with the report",
            arguments=[types.PromptArgument(name="query", description="the user's question",
                                            required=False)])])

    async def get_prompt(ctx: Any, params: Any) -> types.GetPromptResult:
        if params.name != "context":
            raise MCPError(code=types.INVALID_PARAMS, message=f"no such prompt: {params.name}")
        query = (params.arguments or {}).get("query") or ""
        run = dataclasses.replace(_with_meta(plan, ctx.meta), query=str(query))
        result = await run_plan(run, providers)
        context = result.context or "(no context: nothing was kept)"
        text = f"{context}\n\n-- report --\n{result.report_text(Style(False))}"
        return types.GetPromptResult(
            description="lionctx context",
            messages=[types.PromptMessage(role="user",
                                          content=types.TextContent(type="text", text=text))])

    return Server("lionctx", on_list_resources=list_resources, on_read_resource=read_resource,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt)


async def serve(plan: Any, listen: tuple[str, int] | None) -> None:
    """Serve ``plan``'s sources until the host goes away (stdio) or interrupted."""
    from ._resolve import open_providers

    async with open_providers(plan) as providers:
        server = build_server(plan, providers)
        if listen is None:
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return
        import uvicorn

        host, port = listen
        app = server.streamable_http_app(host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning")
        await uvicorn.Server(config).serve()


def cmd_mcp_serve(args: argparse.Namespace) -> int:
    """``lionctx mcp serve --config FILE [--http HOST:PORT]``."""
    import anyio

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise UsageError("lionctx mcp needs the MCP SDK: pip install 'lionctx[mcp]'") from None
    listen = parse_listen(args.http) if args.http is not None else None
    plan = _plan(args.config)
    anyio.run(serve, plan, listen)
    return 0


def add_mcp_parser(sub: Any, verbose: Callable[[Any], None]) -> None:
    """``lionctx mcp serve``'s arguments, on the ``lionctx`` command's subparsers ``sub``."""
    mcp = sub.add_parser("mcp", help="serve the configured sources to MCP hosts")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", metavar="COMMAND", parser_class=type(mcp),
                                 required=True)
    serve = mcp_sub.add_parser(
        "serve", help="serve a config's sources as MCP resources and a 'context' prompt",
        description="Serve each source of --config as the MCP resource "
                    "lionctx://sources/<name>, and one MCP prompt 'context' (argument "
                    "'query') returning the resolved, budgeted, tagged context with its "
                    "report. stdio by default; --http HOST:PORT for streamable HTTP on a "
                    "local address.")
    serve.add_argument("--config", metavar="FILE", required=True,
                       help="a TOML file declaring sources (as for resolve)")
    serve.add_argument("--http", metavar="HOST:PORT", default=None,
                       help="streamable HTTP on a local address (127.0.0.1, localhost, ::1)")
    verbose(serve)
    serve.set_defaults(handler=cmd_mcp_serve)

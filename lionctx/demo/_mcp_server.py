"""The demo's MCP server: each user's open support tickets, as MCP resources.

Started by ``lionctx demo`` as a child process speaking MCP over stdio
(``python <this file>``), and read through
:class:`~lionctx.providers.McpResourceProvider` with the template
``tickets://{user_id}/open``. It imports only the ``mcp`` SDK, so it runs the same
whether lionctx is installed or run from a source tree. The server is built in
:func:`main`, never on import.
"""

from __future__ import annotations

__all__ = ["TICKETS", "main"]

#: Open tickets per user id.
TICKETS: dict[str, list[str]] = {
    "u-1042": ["T-5531 (open, 2 days): invoice PDF shows the wrong VAT number",
               "T-5560 (waiting on customer): add a second billing contact"],
    "u-2077": ["T-5602 (open, 1 hour): SSO login loops for new seats"],
}


def main() -> None:
    """Serve ``tickets://{user_id}/open`` over stdio until stdin closes."""
    import logging

    from mcp.server.mcpserver import MCPServer

    logging.disable(logging.WARNING)  # stderr is the user's terminal: no server logs
    app = MCPServer("lionctx-demo-tickets", log_level="ERROR")

    @app.resource("tickets://{user_id}/open", mime_type="text/plain")
    def open_tickets(user_id: str) -> str:
        tickets = TICKETS.get(user_id)
        if not tickets:
            return "No open tickets."
        return "Open tickets:\n" + "\n".join(f"- {t}" for t in tickets)

    app.run()


if __name__ == "__main__":
    main()

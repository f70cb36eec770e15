"""`memvault mcp`: serve the vault to agents over the Model Context Protocol."""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.cli.output import VaultOption, root_vault


def mcp(
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 (at /mcp) instead of stdio.")] = False,
    port: Annotated[int, typer.Option("--port", help="Port for --http (1-65535).")] = 8765,
    vault_path: VaultOption = None,
) -> None:
    """Run an MCP server for agents (Claude Code, Claude Desktop, Cursor) on stdin/stdout.

    Tools: add, search, recent, show, forget, context, status, why; MEMORY.md is a resource. The server
    stays warm: the search index and embedding model load once, on the first search, and each
    search first catches up with what other processes wrote. stdout carries only the protocol;
    notices go to stderr. See docs/mcp.md for client setup.

    Example: claude mcp add memvault -- "$HOME/.memvault-venv/bin/memvault" mcp --vault "$HOME/memory"
    """
    from memvault.errors import check_count
    from memvault.mcp.worker import VaultWorker

    check_count("--port", port, 1, 65535)
    worker = VaultWorker(vault_path or root_vault())  # a bad --vault fails here, before the SDK loads
    from memvault.mcp.server import serve

    serve(worker, port if http else None)


def register(app: typer.Typer) -> None:
    app.command()(mcp)

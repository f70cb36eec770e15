"""`memvault mcp`: the vault served to agents over the Model Context Protocol.

A front end like the CLI: it opens one `Vault` for the server's life and renders its results as
MCP tool results. The `mcp` SDK is imported only here, so `import memvault.cli` stays light.
"""

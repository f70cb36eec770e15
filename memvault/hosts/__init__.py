"""Agent hosts (Claude Code, Claude Desktop, Cursor, Codex): `memvault install` writes the MCP
server into their config files (install.py), editing each in its own format (configs.py)."""

"""memvault's command line: parses, calls memvault.Vault, renders. No vault logic lives here."""

from __future__ import annotations


def main() -> None:
    from memvault.cli.app import app

    app(prog_name="memvault")

"""memvault's command line: parses, calls memvault.Vault, renders. No vault logic lives here."""

from __future__ import annotations


def main() -> None:
    import os
    import sys

    from memvault.cli.app import app

    try:
        app(prog_name="memvault")
    except BrokenPipeError:
        # `memvault --help | head`: the reader left before help was written; not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

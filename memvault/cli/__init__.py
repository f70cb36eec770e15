"""memvault's command line: parses, calls memvault.Vault, renders. No vault logic lives here."""

from __future__ import annotations


def main() -> None:
    from memvault.cli.app import app, end_now_if_a_call_lingers, quiet_stdout

    try:
        app(prog_name="memvault")
    except BrokenPipeError:
        # The reader left before everything was written (`memvault ... | head`): not an error.
        quiet_stdout()
    except SystemExit as done:
        end_now_if_a_call_lingers(done.code)
        raise

"""memvault's command line: parses, calls memvault.Vault, renders. No vault logic lives here."""

from __future__ import annotations

import signal


def main() -> None:
    from memvault.cli.app import app, end_past_litellm, quiet_stdout

    try:
        app(prog_name="memvault")
    except BrokenPipeError:
        # The reader left before everything was written (`memvault ... | head`): not an error.
        quiet_stdout()
    except SystemExit as done:
        end_past_litellm(done.code)
        raise
    finally:
        # An interrupt redelivered by timer (app._interrupt_again) after the command is over would
        # only kill the exiting process by SIGALRM.
        signal.setitimer(signal.ITIMER_REAL, 0)

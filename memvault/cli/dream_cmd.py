"""`memvault dream`: nightly consolidation of the daily logs into the wiki."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memvault.cli.output import JsonOption, VaultOption, echo, emit_error, emit_json, notice, open_vault
from memvault.errors import ExitCode, InvalidInput, LLMError, LogLinesUnreadable, check_count


def dream(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and the model's proposed operations for the first batch; write nothing.")] = False,
    max_batches: Annotated[int | None, typer.Option("--max-batches", help="Stop after N batches, 0 or more (default: until caught up).")] = None,
    min_facts: Annotated[int | None, typer.Option("--min-facts", help="Skip a quiet night: do nothing unless at least N facts are pending (0 or more).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="litellm model string (default: MEMVAULT_MODEL, then llm.model in memvault.toml).")] = None,
    undo: Annotated[bool, typer.Option("--undo", help="Revert the last applied dream batch (commits that only logged a failure are passed over).")] = False,
    status: Annotated[bool, typer.Option("--status", help="Show the watermark, pending days and facts, the last result, and a dream running now.")] = False,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Consolidate pending daily logs into wiki pages, index.md and MEMORY.md with an LLM.

    Days after the watermark and before today are sent in batches of at most dream.max_days days
    (memvault.toml). What passes the check against the facts is one commit per batch; the facts
    left are asked again in smaller batches, and the watermark passes a day once all its facts are
    done. Exit codes: 5 when the model fails or a fact is still refused alone (log.md records it;
    the rest is applied), 6 when a dream is running.

    Example: memvault dream --min-facts 5 --model openai/gpt-4o-mini
    """
    _check_options(dry_run=dry_run, max_batches=max_batches, min_facts=min_facts, model=model, undo=undo,
                   status=status)
    vault = open_vault(vault_path)
    if status:
        data = vault.dream_status()
        emit_json(data) if json_ else _print_status(data)
    elif undo:
        _undo(vault, json_)
    else:
        report = vault.dream(dry_run=dry_run, max_batches=max_batches, min_facts=min_facts, model=model,
                             progress=None if json_ else notice)
        _finish(report, json_)


def _check_options(*, dry_run: bool, max_batches: int | None, min_facts: int | None, model: str | None,
                   undo: bool, status: bool) -> None:
    """Refuse a command line whose options contradict or would be ignored, before a vault is opened."""
    if undo and (dry_run or status):
        raise InvalidInput("--undo cannot be combined with --dry-run or --status")
    run_options = {"--dry-run": dry_run, "--max-batches": max_batches is not None,
                   "--min-facts": min_facts is not None, "--model": model is not None}
    given = [name for name, on in run_options.items() if on]
    if (status or undo) and given:  # they would be ignored: say so rather than seem to obey
        raise InvalidInput(f"{'--status' if status else '--undo'} takes none of the run's options ({', '.join(given)})")
    for name, value in (("--max-batches", max_batches), ("--min-facts", min_facts)):
        if value is not None:
            check_count(name, value, 0)  # before a first use could create the default vault


def _undo(vault: Any, json_: bool) -> None:
    done = vault.dream_undo()
    if json_:
        emit_json(done)
    else:
        echo(f"reverted {done['reverted'][:12]} ({done['message']}); watermark now {done['watermark'] or 'none'}")


def _finish(report: Any, json_: bool) -> None:
    """Print a run's report, then exit as its outcome asks (5 for a model failure, 1 when stopped)."""
    data = report.to_dict()
    if json_:
        emit_json(data)
    else:
        _print_report(data)
    if report.error:
        # the summary above is the result; the failure itself is reported like any other error
        if json_:
            emit_error(LLMError(report.error))
        else:
            notice(report.error)
        raise typer.Exit(int(ExitCode.LLM))
    if report.stopped:
        # the days before were consolidated; this one waits for a person: a non-zero exit tells cron
        if json_:
            emit_error(LogLinesUnreadable(report.stopped))
        raise typer.Exit(int(ExitCode.ERROR))
    for label in data["skipped"]:
        notice(f"batch {label} was skipped after repeated failures; its facts stay searchable as raw facts")


def _print_report(data: dict) -> None:
    if data["gated"] and not data["batches"]:
        echo(f"nothing to do: {data['pending_facts']} pending fact(s)")
        return
    for batch in data["batches"]:
        line = f"{batch['label']}: {batch['outcome']}"
        if batch["outcome"] in ("ok", "proposed") and "removed" in batch:
            line += (f" — {len(batch.get('updated', []))} page(s) rewritten without forgotten facts, "
                     f"{len(batch['removed'])} removed")
        elif batch["outcome"] in ("ok", "proposed"):
            line += (f" — {len(batch.get('created', []))} created, {len(batch.get('updated', []))} updated, "
                     f"{batch.get('conflicts', 0)} conflict(s), {batch.get('noop', 0)} noop")
        if batch.get("reason") and batch["outcome"] == "proposed":
            line += f" ({batch['reason']})"  # a failure's reason is told once, on stderr
        echo(line)
        if batch.get("proposal") is not None:
            import json

            echo(json.dumps(batch["proposal"], ensure_ascii=False, indent=2))
    echo(f"watermark: {data['watermark_before'] or 'none'} → {data['watermark_after'] or 'none'}")


def running_line(running: dict) -> str:
    """A running dream in one line: its batch, its step since when, and what it has done."""
    where = f"batch {running['batch']}: " if running.get("batch") else ""
    since = f" since {running['since']}" if running.get("since") else ""
    line = f"{where}{running.get('step') or 'starting'}{since}"
    if running.get("pid"):
        line += (f" (pid {running['pid']}; {running.get('batches_done', 0)} of {running.get('planned_batches', 0)} "
                 f"planned batch(es) done, {running.get('facts_done', 0)} of {running.get('pending_facts', 0)} "
                 "fact(s) accounted for)")
    return line


def _print_status(data: dict) -> None:
    echo(f"watermark: {data['watermark'] or 'none'}")
    echo(f"pending: {data['pending_days']} day(s), {data['pending_facts']} fact(s)"
         + (f" ({data['late_facts']} late)" if data["late_facts"] else ""))
    if data["scrub_pages"]:
        echo(f"to rewrite without forgotten facts: {', '.join(data['scrub_pages'])}")
    if data.get("stopped"):
        echo(f"stopped: {data['stopped']}")
    if data["next_batch"]:
        echo(f"next batch: {data['next_batch']} (failed attempts: {data['failed_attempts']}/{data['max_retries']})")
    if data.get("running"):
        echo(f"running: {running_line(data['running'])}")
    last = data["last_dream"]
    echo(f"last dream: {last['at']} {last['outcome']} {last['batch']}" if last else "last dream: never")
    echo(f"model: {data['model'] or 'not configured'}")


def register(app: typer.Typer) -> None:
    app.command()(dream)

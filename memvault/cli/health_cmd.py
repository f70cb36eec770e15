"""Health commands: status, doctor."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Annotated

import typer

from memvault.cli.dream_cmd import running_line
from memvault.cli.output import (
    STATUS_STYLES,
    AsOfOption,
    JsonOption,
    VaultOption,
    echo,
    emit_json,
    line,
    notice,
    open_vault,
    progress_bar,
    root_vault,
)
from memvault.errors import ExitCode

_MARKS = {"ok": "ok   ", "warn": "warn ", "fail": "FAIL ", "fixed": "fixed"}


def status(as_of: AsOfOption = None, json_: JsonOption = False, vault_path: VaultOption = None) -> None:
    """Where the vault stands: facts, days, pages, dream progress, search index, remote, lock.

    With --as-of: its facts, pages and dream progress then (from git), and the commit that answered.

    Example: memvault status --json
    Example: memvault status --as-of 2026-06-01
    """
    state = open_vault(vault_path).status(as_of=as_of)
    if json_:
        emit_json(state)
        return
    _print_vault(state, as_of)
    _print_dream(state)
    if as_of:
        return  # (the index, the remote and the lock are of now)
    _print_index(state["index"])
    _print_remote(state["remote"])
    lock = state["lock"]
    if lock:
        from memvault.vault import Vault

        echo(f"lock        {Vault.held_by(lock)}")
    if state["git"]["uncommitted"]:
        echo(f"git         {state['git']['uncommitted']} uncommitted change(s) (see `memvault doctor`)")


def _print_vault(state: dict, as_of: str | None) -> None:
    """Status's first lines: where the vault is (and which commit answered), its facts and pages."""
    facts = state["facts"]
    echo(f"vault       {state['path']}")
    if as_of:
        past = state["as_of"]
        echo(f"as of       {past['asked']}: commit {past['commit'][:10]} of {past['at']} ({past['message']})")
    echo(f"facts       {facts['live']} ({facts['forgotten']} forgotten, {facts['purged']} purged) "
         f"in {state['days']} daily log(s)")
    if facts.get("unreadable"):
        echo(f"            {facts['unreadable']} line(s) in the daily logs are not facts memvault can read "
             "(`memvault doctor --full` names them)")
    echo(f"pages       {state['pages']}")


def _print_dream(state: dict) -> None:
    """Status's dream lines: the watermark, what is pending, the last dream, one running or failing."""
    echo(f"watermark   {state['watermark'] or 'none (nothing consolidated yet)'}")
    scrub = state["pending"].get("scrub_pages")
    echo(f"pending     {state['pending']['days']} day(s), {state['pending']['facts']} fact(s)"
         + (f"; {scrub} page(s) citing forgotten facts to rewrite" if scrub else ""))
    last = state["last_dream"]
    if last:
        echo(f"last dream  {last['at']} {last['outcome']} {last.get('batch') or ''}".rstrip())
    else:
        echo("last dream  never")
    running = state.get("dream_running")
    if running:
        echo(f"dreaming    {running_line(running)}")
    failing = state.get("failing")
    if failing:
        echo(f"failing     batch {failing['batch']}: {failing['failures']} time(s) since {failing['since']}: "
             f"{failing['reason']}")
    if state.get("stopped"):
        echo(f"stopped     {state['stopped']}")


def _print_index(index: dict) -> None:
    if not index["built"]:
        echo("index       not built yet (the first search builds it)")
    elif index["unavailable"]:
        echo(f"index       cannot be opened: {index['unavailable']}")
    elif index["damaged"]:
        echo(f"index       damaged ({index['damaged']}); the next search rebuilds it")
    else:
        echo(f"index       {index['documents']} document(s), {index['pending_embeddings']} without a vector, "
             f"{index['drift']} file(s) changed since indexing")
        built = index.get("built_with")
        if built and built != index["model"]:
            echo(f"model       vectors by {built}; the next search re-embeds with {index['model']}")
        else:
            echo(f"model       {built or index['model']}")
    echo(f"rerank      {index['rerank'] or 'off'}")


def _print_remote(remote: dict | None) -> None:
    if remote is None:
        echo("remote      none")
    elif remote["synced"]:
        echo(f"remote      {remote['url']}: {remote['ahead']} ahead, {remote['behind']} behind (as of last sync)")
    else:
        echo(f"remote      {remote['url']}: never synced")


def doctor(
    fix: Annotated[bool, typer.Option("--fix", help="Repair what is safe: commit leftovers, reindex, install the merge driver, re-create a lost repository.")] = False,
    llm: Annotated[bool, typer.Option("--llm", help="Also send the dream model one tiny request, to check it answers.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Also run the checks that read every daily log and the whole search index on a large vault (says how long first; by default they run where they take a few seconds).")] = False,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Check the vault's health and explain each problem; exits 1 when a check fails.

    Checks: the git repository itself, git identity, keys of memvault.toml no setting reads (a typo
    leaves its setting at the default; named with the nearest setting), union merge driver,
    unparseable log lines,
    daily logs named for a day that does not exist, vault files a .gitignore ignores,
    citations of missing facts, pages citing forgotten facts, credentials a hand edit put in a fact,
    page or MEMORY.md, search index drift and damage, every vector row against its checksum,
    embedding cache damage (its layout; every page and vector), embedding model,
    a dream batch that keeps failing, the LLM configuration (model string, key, window; no network
    call unless --llm), stale locks, uncommitted changes. A vault whose .git is missing or broken
    gets only the first check; --fix re-creates the repository from its files. A memvault.toml
    that cannot be loaded gets only those two checks, and nothing is fixed until it loads.
    The checks that read every daily log (log lines, fact counts, fact ids, citations,
    credentials) or the whole search index (index rows, cache rows) run by default only where
    they take a few seconds; on a larger vault doctor says what they would take and --full runs
    them, with a progress bar on a terminal.

    Example: memvault doctor --fix
    """
    from memvault.vault import Vault

    with progress_bar() if not json_ else nullcontext() as progress:
        report = Vault.diagnose(vault_path or root_vault(), fix=fix, llm=llm, notify=notice, full=full or None,
                                progress=progress)
    if json_:
        emit_json(report.to_dict())
    else:
        for check in report.checks:
            mark = _MARKS.get(check.status, check.status)
            line((mark, STATUS_STYLES.get(mark.strip(), "")), f"  {check.name}: {check.message}")
            for detail in check.details:
                echo(f"         {detail}")
            if check.fix and check.status in ("warn", "fail") and not fix:
                echo(f"         (`memvault doctor --fix` would {check.fix})")
        if report.skipped and report.full:
            echo(f"skip   {', '.join(report.skipped)}: they read {report.full['reads']} "
                 f"({report.full['message']}); `memvault doctor --full` runs them")
    if not report.ok:
        raise typer.Exit(int(ExitCode.ERROR))


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.command()(doctor)

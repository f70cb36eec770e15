"""Fact commands: add, show, recent, history, forget, purge."""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.cli.output import (
    CATEGORY,
    ID,
    TAGS,
    WHEN,
    AsOfOption,
    Column,
    FullOption,
    JsonOption,
    VaultOption,
    echo,
    emit_json,
    line,
    notice,
    open_vault,
    reader,
    table,
)
from memvault.cli.terminal import current
from memvault.errors import InvalidInput, InvalidItem, check_count
from memvault.formats.drafts import read_fact_lines

CategoryOption = Annotated[str | None, typer.Option("--category", "-c", help="Only facts of this category.")]
TagOption = Annotated[str | None, typer.Option("--tag", "-t", help="Only facts with this tag.")]
SinceOption = Annotated[str | None, typer.Option("--since", help="From this time on: 2026-11-01, yesterday, 7d, 12h.")]
UntilOption = Annotated[str | None, typer.Option("--until", help="Up to this time (a date includes the whole day).")]


def add(
    text: Annotated[str | None, typer.Argument(help="The fact, in plain words.", show_default=False)] = None,
    category: Annotated[str, typer.Option("--category", "-c", help="fact, preference, correction, entity, decision, relationship, principle, commitment, moment, skill or event.")] = "fact",
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", metavar="TAG", help="A tag (repeatable; one given twice is kept once).")] = None,
    source: Annotated[str | None, typer.Option("--source", help="Who or what said it: agent or session id.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Conversation or session id, for threading.")] = None,
    importance: Annotated[float | None, typer.Option("--importance", help="0..1; raises the fact in search and MEMORY.md.")] = None,
    at: Annotated[str | None, typer.Option("--at", help="When it happened: ISO 8601 date or datetime, or yesterday, 3d, 12h; backdates into that day's log.")] = None,
    stdin: Annotated[bool, typer.Option("--stdin", help="Read one fact per line (plain text or a JSON object); one commit.")] = False,
    allow_secret: Annotated[bool, typer.Option("--allow-secret", help="Store a text holding a credential (a key, token, password) anyway; it is never sent to an LLM.")] = False,
    supersedes: Annotated[str | None, typer.Option("--supersedes", metavar="ID", help="The id of an older fact this one replaces (a correction, a new state); both stay, search lists this one first.")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Your name for this fact (one line): if a fact was stored under it already, nothing is added and its id is printed, so a retry never adds twice.")] = None,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Remember a fact: append it to its day's log and commit. Prints the new fact id.

    Nothing is merged or deduplicated: adding the same text twice gives two facts, unless both
    carry the same --key: then the second adds nothing, prints the first one's id and exits 0.
    With --stdin each line is plain text or {"text", "category", "tags", "source", "session",
    "importance", "at", "supersedes", "key"}; the whole batch is checked first and a bad line
    writes nothing.
    A text holding a credential (cloud key, token, private key, password) is refused (exit 2)
    unless --allow-secret. --supersedes must name a live fact nothing supersedes yet (exit 2).

    Example: memvault add "Alice lives in Lyon" --supersedes 1k0w8a78q5y9c48y
    Example: memvault add "Alice moved to Lyon" --category event --tag alice --at 2026-11-02
    """
    if stdin and text is not None:
        raise InvalidInput("give either TEXT or --stdin, not both")
    if stdin and supersedes is not None:
        raise InvalidInput('with --stdin, give "supersedes" in the records, not --supersedes')
    if stdin and key is not None:
        raise InvalidInput("--key names one fact: with --stdin give each line its own \"key\"")
    if stdin:
        env = current()
        if env.stdin_isatty:
            notice("reading facts from the terminal, one per line; press Ctrl-D on an empty line to end")
        drafts, line_numbers = read_fact_lines(env.stdin.read())
        vault = open_vault(vault_path)
        try:
            facts = vault.add_many(drafts, allow_secret=allow_secret)
        except InvalidItem as e:
            raise InvalidInput(f"line {line_numbers[e.item - 1]}: {e.reason}") from None
    else:
        if text is None:
            raise InvalidInput("missing TEXT (or use --stdin)")
        vault = open_vault(vault_path)
        facts = [vault.add(text, category=category, tags=tag or (), source=source, session=session,
                           importance=importance, at=at, allow_secret=allow_secret, supersedes=supersedes,
                           key=key)]
    if json_:
        emit_json(facts[0].to_dict() if not stdin else [f.to_dict() for f in facts])
    else:
        for fact in facts:
            echo(fact.id)


def show(
    fact_id: Annotated[str, typer.Argument(metavar="ID", help="The fact id printed by `add`.")],
    as_of: AsOfOption = None,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Show one fact with all its fields. A forgotten fact says when and why it was forgotten.

    A fact that supersedes another, or that another supersedes, shows the chain, oldest first.

    Example: memvault show 01jdq5x8k2m7v3qa --json
    """
    memory = reader(open_vault(vault_path), as_of, tell=not json_)
    view = memory.show(fact_id)
    fact = view.live()
    if json_:
        data = {k: v for k, v in view.to_dict().items() if k != "forgotten"}
        emit_json({**data, "as_of": memory.moment.to_dict()} if as_of else data)
        return
    echo(fact.text)
    echo("")
    chain = " -> ".join(view.chain) if len(view.chain) > 2 else None
    fields = [("id", fact.id, ID), ("at", fact.at.isoformat(), ""), ("category", fact.category, CATEGORY),
              ("tags", ", ".join(fact.tags) or None, TAGS), ("source", fact.source, ""),
              ("session", fact.session, ""), ("importance", fact.importance, ""), ("key", fact.key, ""),
              ("log", fact.path, ""), ("supersedes", fact.supersedes, ID),
              ("superseded", view.superseded_by and f"by {view.superseded_by}", ID), ("chain", chain, ID)]
    for label, value, style in fields:
        if value is not None:
            line((f"{label + ':':<11} ", WHEN), (str(value), style))


def recent(
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many facts at most (at least 1).")] = 20,
    since: SinceOption = None,
    until: UntilOption = None,
    category: CategoryOption = None,
    tag: TagOption = None,
    source: Annotated[str | None, typer.Option("--source", help="Only facts from this source.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Only facts from this session.")] = None,
    oldest_first: Annotated[bool | None, typer.Option("--oldest-first/--newest-first", help="Order of the listed facts (default: oldest first with --source or --session, else newest first).", show_default=False)] = None,
    as_of: AsOfOption = None,
    full: FullOption = False,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """List the newest facts. Forgotten facts never appear.

    With --source or --session the facts read as a thread: the same newest ones, oldest first.
    With --as-of, the facts the vault held then (a fact counts from its commit, not its time).

    Example: memvault recent --since 7d --tag alice
    Example: memvault recent --session chat-42 --limit 50
    """
    check_count("limit", limit, 1)  # before a first use could create the default vault
    memory = reader(open_vault(vault_path), as_of, tell=not json_)
    facts = memory.recent(
        limit, since=since, until=until, category=category, tag=tag, source=source, session=session,
        oldest_first=oldest_first,
    )
    if json_:
        listed = [f.to_dict() for f in facts]
        emit_json({"as_of": memory.moment.to_dict(), "facts": listed} if as_of else listed)
        return
    table(FACT_COLUMNS, [fact_row(fact) for fact in facts], full=full)


FACT_COLUMNS = (Column("when", WHEN), Column("id", ID), Column("category", CATEGORY, optional=True),
                Column("text", text=True), Column("tags", TAGS, optional=True))


def fact_row(fact) -> list[str]:
    return [fact.at.strftime("%Y-%m-%d %H:%M"), fact.id, fact.category, fact.text,
            " ".join(f"#{t}" for t in fact.tags)]


def history(
    fact_id: Annotated[str, typer.Argument(metavar="ID", help="The fact id.")],
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """The git commits that touched a fact: when it was added, edited, consolidated, forgotten.

    Example: memvault history 01jdq5x8k2m7v3qa
    """
    commits = open_vault(vault_path).history(fact_id)
    if json_:
        emit_json(commits)
        return
    table((Column("when", WHEN), Column("commit", "yellow"), Column("message", text=True)),
          [[c["at"], c["commit"][:10], c["message"]] for c in commits])


def forget(
    fact_id: Annotated[str, typer.Argument(metavar="ID", help="The fact id.")],
    reason: Annotated[str | None, typer.Option("--reason", "-r", help="Why, for the audit trail: one line of printable text, at most 500 characters.")] = None,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Forget a fact: a committed tombstone hides it from listing, search and dream for good.

    The log line itself is kept, so git history stays auditable. Forgetting twice changes nothing.
    Wiki pages that cite the fact are named on stderr: the next `memvault dream` rewrites them.

    Example: memvault forget 01jdq5x8k2m7v3qa --reason "wrong person"
    """
    result = open_vault(vault_path).forget(fact_id, reason)
    tombstone = result.tombstone
    if json_:
        emit_json(result.to_dict())
    elif result.already_forgotten:
        notice(f"fact {tombstone.id} was already {'purged' if tombstone.purged else 'forgotten'} at {tombstone.at}; "
               "nothing changed")
    else:
        echo(f"forgot {tombstone.id}")
        if result.cited_by:
            notice(f"cited by {', '.join(result.cited_by)}: search and context withhold those page(s) and "
                   "the next `memvault dream` rewrites them without the fact")


def purge(
    fact_ids: Annotated[list[str], typer.Argument(metavar="ID...", help="The fact ids, in any case (O reads as 0, I and L as 1), as for forget.", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (scripts); required without a terminal.")] = False,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Remove facts' text from the logs and from every commit of the history, for good.

    Pages citing the facts lose those statements, the search index and embedding cache lose
    the texts, old objects are pruned, and a tombstone without text or hash keeps the facts dead
    everywhere. Asks first (shows the facts, commits to rewrite, pages) unless --yes; without a
    terminal --yes is required. The remote keeps the old history until `memvault sync` pushes
    the rewritten one; copies pulled elsewhere before that are out of reach (docs/purge.md).

    Example: memvault purge 01jdq5x8k2m7v3qa --yes
    """
    vault = open_vault(vault_path)
    env = current()
    if not yes and not (env.stdin_isatty and env.stderr_isatty):
        raise InvalidInput("purge rewrites the history and cannot be undone: pass --yes to confirm "
                           "(there is no terminal to ask on); nothing changed")
    report = vault.purge(fact_ids, confirm=None if yes else _ask)
    if json_:
        emit_json(report.to_dict())
        return
    for fact_id in report.already_purged:
        notice(f"fact {fact_id} was already purged; nothing to do for it")
    if report.finished:  # (a run that finishes an interrupted purge purges nothing new)
        count = len(report.finished)
        echo(f"finished the interrupted purge of {count} fact{'s' if count != 1 else ''} "
             f"({', '.join(report.finished)}): history rewritten, old objects pruned")
    elif report.purged:
        count = len(report.purged)
        echo(f"purged {count} fact{'s' if count != 1 else ''} ({', '.join(report.purged)}): "
             f"{report.commits_rewritten} commit(s) rewritten, old objects pruned")
        if report.pages:
            echo(f"statements citing them were removed from {', '.join(report.pages)}; the next `memvault dream` "
                 "rewrites those pages")
    else:
        return
    if report.index and report.index.get("error"):
        notice(f"search index not rebuilt: {report.index['error']}; run `memvault reindex --clear`")
    if report.remote:
        echo(f"the remote ({report.remote}) still holds the old history: run `memvault sync` to push the "
             "rewritten one (other clones adopt it on their next sync; copies pulled elsewhere before now "
             "are out of memvault's reach)")


def _ask(plan) -> bool:
    """Show what a purge removes and ask (on stderr; the answer from the terminal)."""
    notice("purge removes these facts' text from the logs and from every commit, for good:")
    for item in plan.facts:
        typer.echo(f"  {item.id}  {item.words}", err=True)
    typer.echo(f"  {plan.commits} commit(s) to rewrite" + (f"; pages citing them: {', '.join(plan.pages)}"
                                                         if plan.pages else ""), err=True)
    if plan.quoting:
        typer.echo(f"  {len(plan.quoting)} other fact(s) quote the text and keep their other words "
                   f"(the text becomes [purged] in them): {', '.join(plan.quoting)}", err=True)
    if plan.remote:
        typer.echo(f"  the remote ({plan.remote}) is rewritten by the next `memvault sync`", err=True)
    return typer.confirm("purge?", default=False, err=True)


def register(app: typer.Typer) -> None:
    from memvault.cli.freetext import FreeTextCommand

    app.command(cls=FreeTextCommand)(add)
    for command in (show, recent, history, forget, purge):
        app.command()(command)

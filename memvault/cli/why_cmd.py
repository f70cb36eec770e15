"""`memvault why`: the chain from a memory back to its facts and commits."""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.cli.output import ID, WHEN, JsonOption, VaultOption, echo, emit_json, line, open_vault


def why(
    target: Annotated[str, typer.Argument(metavar="TARGET", help="A MEMORY.md line (its number or words in it), a page section wiki/<zone>/<page>.md#<heading>, or a fact id.")],
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Trace a memory back to its sources: page, cited facts, and the commits of each fact.

    For a line of MEMORY.md, a wiki page section (the id search prints) or a fact: the page and
    its sections, the fact ids each cites, and for every fact its text, time, source, session, the
    commit that added it, the dream batch that consolidated it (log.md), and what superseded or
    forgot it. A fact id shows its chain of supersedes links and the sections citing it now.

    Example: memvault why 3
    Example: memvault why "green tea"
    Example: memvault why wiki/people/alice.md#drinks --json
    """
    report = open_vault(vault_path).why(target)
    if json_:
        emit_json(report.to_dict())
        return
    if report.memory_line:
        memory = report.memory_line
        line(("MEMORY.md", WHEN), f":{memory['number']}  {memory['text'].strip()}")
    if report.page:
        written = report.page["written"]
        line(("page ", WHEN), (report.page["path"], ID),
             f"  written {written['at']} {written['commit'][:10]} {written['message']}" if written else "")
    for section in report.sections:
        line(("section ", WHEN), (section.id, ID))
        for text in section.text.split("\n"):
            echo(f"  {text}")
    for source in report.facts:
        _fact(source.to_dict())


def _fact(fact: dict) -> None:
    echo()
    if not fact["found"]:
        line(("fact ", WHEN), (fact["id"], ID), "  (no daily log holds it: purged, or a citation of nothing)")
    else:
        line(("fact ", WHEN), (fact["id"], ID), f"  {fact['at']}  [{fact['category']}]")
        for text in fact["text"].split("\n"):
            echo(f"  {text}")
        labels = [f"{name} {fact[name]}" for name in ("source", "session") if fact[name]]
        echo(f"  {'  '.join([*labels, 'log ' + fact['path']])}")
    _step("added", fact["added"])
    consolidated = fact["consolidated"]
    if consolidated:
        batch = f"  (batch {consolidated['batch']}, {consolidated['how']})" if consolidated["batch"] else \
            f"  ({consolidated['how']})"
        _step("consolidated", consolidated, batch)
    if fact["cited_by"]:
        echo(f"  {'cited by':<14}{', '.join(fact['cited_by'])}")
    if fact["supersedes"]:
        echo(f"  {'supersedes':<14}{fact['supersedes']}")
    if fact["superseded_by"]:
        _step("superseded by", fact["superseded_by"]["commit"], f"  by {fact['superseded_by']['id']}")
    if fact["forgotten"]:
        reason = fact["forgotten"]["reason"]
        _step("purged" if fact["forgotten"]["purged"] else "forgotten", fact["forgotten"]["commit"],
              f"  ({reason})" if reason else "")


def _step(label: str, commit: dict | None, after: str = "") -> None:
    if commit is None:
        echo(f"  {label:<14}(no commit found){after}")
        return
    echo(f"  {label:<14}{commit['at']}  {commit['commit'][:10]}  {commit['message']}{after}")


def register(app: typer.Typer) -> None:
    app.command()(why)

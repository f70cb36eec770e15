"""Regenerate docs/cli.md and completions/ from the CLI: `python -m memvault.cli.docs_gen`.

`--check` writes nothing and exits 1 when a file is out of date (what the tests and CI run).
"""

from __future__ import annotations

import sys
from pathlib import Path

from memvault.cli.completion import HEADER, PROG, completion_script

ROOT = Path(__file__).resolve().parents[2]
COMPLETION_FILES = {"bash": "completions/memvault.bash", "zsh": "completions/_memvault",
                    "fish": "completions/memvault.fish"}
CLI_DOC = "docs/cli.md"


def cli_markdown() -> str:
    import typer
    from typer import Context

    from memvault.cli.app import app

    root = typer.main.get_command(app)
    root_ctx = Context(root, info_name=PROG, terminal_width=100, max_content_width=100)
    out = [f"# `{PROG}` command line", "", f"<!-- {HEADER} -->", "", _help_body(root.help or ""), "",
           "Every command but `mcp` takes `--json` (one JSON document on stdout; see [json.md](json.md)) and",
           "`--vault PATH` (or `MEMVAULT_VAULT`), before or after the command name. Errors: one line on stderr",
           "and a non-zero exit code. On a terminal, lists are tables fitted to its width (`--full` shows whole",
           "texts); piped, they are tab-separated rows.", ""]
    # The options of `memvault` itself (--version, --vault before the command), as each command's.
    rows = [r for r in (p.get_help_record(root_ctx) for p in root.params if not getattr(p, "hidden", False)) if r]
    out += ["| option of `memvault` itself | description |", "|---|---|",
            *(f"| `{name}` | {_cell(text)} |" for name, text in rows), "",
            "| command | what it does |", "|---|---|"]
    commands = _walk(root, root_ctx)
    for words, command, _ in commands:
        out.append(f"| [`{' '.join(words)}`](#{'-'.join([PROG, *words])}) | {_short(command.help)} |")
    out.append("")
    for words, command, ctx in commands:
        out += [f"## {' '.join([PROG, *words])}", "", "```", command.get_usage(ctx), "```", "",
                _help_body(command.help or ""), ""]
        rows = [p.get_help_record(ctx) for p in command.params if not getattr(p, "hidden", False)]
        rows = [r for r in rows if r]
        if rows:
            out += ["| argument / option | description |", "|---|---|"]
            out += [f"| `{name}` | {_cell(text)} |" for name, text in rows]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _walk(group, ctx, words=()):
    from typer import Context

    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or getattr(command, "hidden", False):
            continue
        sub_ctx = Context(command, info_name=name, parent=ctx)
        found.append(([*words, name], command, sub_ctx))
        if hasattr(command, "list_commands"):
            found += _walk(command, sub_ctx, (*words, name))
    return found


def _help_body(text: str) -> str:
    # Docstring paragraphs, with "Example:" lines shown as commands.
    lines = []
    for line in text.strip().split("\n"):
        stripped = line.strip()
        if stripped.startswith("Example:"):
            lines.append(f"Example: `{stripped[len('Example:'):].strip()}`  ")
        else:
            lines.append(stripped)
    return "\n".join(lines)


def _short(text: str | None) -> str:
    from memvault.cli.completion import first_sentence

    return _cell(first_sentence(text or ""))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def expected_files() -> dict[str, str]:
    import typer

    from memvault.cli.app import app

    files = {CLI_DOC: cli_markdown()}
    root = typer.main.get_command(app)
    for shell, path in COMPLETION_FILES.items():
        files[path] = completion_script(shell, root)
    return files


def stale_files(root: Path = ROOT) -> list[str]:
    stale = []
    for rel, content in expected_files().items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != content:
            stale.append(rel)
    return stale


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv != ["--check"]:
        sys.stderr.write("usage: python -m memvault.cli.docs_gen [--check]\n")
        return 2
    if argv == ["--check"]:
        stale = stale_files()
        for rel in stale:
            sys.stderr.write(f"out of date: {rel} (run `python -m memvault.cli.docs_gen`)\n")
        return 1 if stale else 0
    for rel, content in expected_files().items():
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        sys.stderr.write(f"wrote {rel}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every command's --json output matches docs/json.md: field names and types, run for real."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "json.md"
_OUTPUT = re.compile(r"^Output(?: \(`([^`]+)`\))?: `([^`]+)`\s*$")


def parse_doc() -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """(outputs: command -> {variant flag or "": type}, types: name -> {field: type})."""
    outputs: dict[str, dict[str, str]] = {}
    types: dict[str, dict[str, str]] = {}
    command = type_name = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            command = line[3:].strip()[len("memvault "):] if line.startswith("## memvault ") else None
            type_name = None
        elif line.startswith("### "):
            type_name = line[4:].strip()
            types[type_name] = {}
        elif command and (m := _OUTPUT.match(line)):
            outputs.setdefault(command, {})[m.group(1) or ""] = m.group(2)
        elif type_name and line.startswith("| ") and not line.startswith(("| field", "|---")):
            cells = [c.strip() for c in line.strip("|").split("|")]
            types[type_name][cells[0]] = cells[1]
    return outputs, types


def problems(value, type_expr: str, types: dict, where: str = "$") -> list[str]:
    """What in `value` disagrees with the documented type (empty when it matches)."""
    alternatives = [t.strip() for t in type_expr.split(" or ")]
    found: list[str] = []
    for alternative in alternatives:
        found = _check(value, alternative, types, where)
        if not found:
            return []
    return found if len(alternatives) == 1 else [f"{where}: {value!r:.60} is not {type_expr}"]


def _check(value, t: str, types: dict, where: str) -> list[str]:
    simple = {"string": str, "boolean": bool, "null": type(None), "object": dict}
    if t == "any":
        return []
    if t in simple:
        return [] if isinstance(value, simple[t]) else [f"{where}: {value!r:.60} is not {t}"]
    if t == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return []
        return [f"{where}: {value!r:.60} is not integer"]
    if t == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return []
        return [f"{where}: {value!r:.60} is not number"]
    if t.startswith("array of "):
        if not isinstance(value, list):
            return [f"{where}: {value!r:.60} is not an array"]
        return [p for i, item in enumerate(value) for p in problems(item, t[len("array of "):], types, f"{where}[{i}]")]
    assert t in types, f"docs/json.md uses type {t!r} but does not define it"
    if not isinstance(value, dict):
        return [f"{where}: {value!r:.60} is not a {t} object"]
    fields = types[t]
    out = []
    for name, field_type in fields.items():
        key = name.rstrip("?")
        if key in value:
            out += problems(value[key], field_type, types, f"{where}.{key}")
        elif not name.endswith("?"):
            out.append(f"{where}: field {key!r} of {t} is missing")
    out += [f"{where}: field {key!r} is not documented in {t}" for key in value
            if key not in fields and f"{key}?" not in fields]
    return out


def all_commands() -> list[str]:
    """Every command that takes --json: all but `mcp`, whose stdout carries the MCP protocol."""
    import typer
    from typer import Context

    from memvault.cli.app import app

    root = typer.main.get_command(app)
    names = []

    def walk(group, ctx, words):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            sub = Context(command, info_name=name, parent=ctx)
            if hasattr(command, "list_commands"):
                walk(command, sub, [*words, name])
            elif any("--json" in getattr(p, "opts", ()) for p in command.params):
                names.append(" ".join([*words, name]))

    walk(root, Context(root, info_name="memvault"), [])
    return names


def test_every_command_documents_its_json_output():
    """A command without an `Output:` line in docs/json.md fails, and so does an unknown type."""
    outputs, types = parse_doc()
    missing = [c for c in all_commands() if c not in outputs]
    assert not missing, f"docs/json.md has no Output for: {', '.join(missing)}"
    for command, variants in outputs.items():
        for t in variants.values():
            for part in t.replace("stream of ", "").replace("array of ", "").split(" or "):
                assert part in types or part in {"string", "integer", "number", "boolean", "null", "object", "any"}, \
                    f"{command}: type {part!r} is not defined"


def test_checker_catches_a_renamed_or_mistyped_field():
    _, types = parse_doc()
    fact = {"id": "x", "text": "t", "at": "2026-01-01T00:00:00+00:00", "category": "fact", "tags": [],
            "source": None, "session": None, "importance": None, "secret": False,
            "path": "logs/2026/2026-01-01.md"}
    assert problems(fact, "Fact", types) == []
    renamed = {**{k: v for k, v in fact.items() if k != "text"}, "body": "t"}
    assert any("'text'" in p for p in problems(renamed, "Fact", types))
    assert any("'body'" in p for p in problems(renamed, "Fact", types))
    assert problems({**fact, "tags": "a"}, "Fact", types)


@pytest.fixture
def outputs(cli, vault_dir, tmp_path):
    """Runs each command with --json in a vault with facts, a forgotten fact, sessions and a remote."""
    documented, types = parse_doc()
    seen: dict[str, list] = {}

    def run(command: str, *args: str, variant: str = "", input: str | None = None, vault: bool = True):
        result = cli(*command.split(), *args, "--json", input=input, vault=vault)
        assert result.exit_code == 0, f"{command} {args}: {result.stderr}"
        text = result.stdout
        streamed = documented[command][variant].startswith("stream of ")
        value = [json.loads(line) for line in text.splitlines()] if streamed else json.loads(text)
        seen.setdefault(command, []).append((variant, value))
        return value

    return run, seen, documented, types


def test_json_outputs_match_the_documentation(outputs, tmp_path, monkeypatch):
    """Runs every command; dream asks the scripted local model server (tests/support/fake_llm.py)."""
    from support.fake_llm import FakeLLM, consolidate_everything

    run, seen, documented, types = outputs
    run("init", str(tmp_path / "other"), vault=False)
    run("status")  # before any index exists: the index fields are the same, some null
    fact = run("add", "Alice prefers green tea", "--session", "chat-1", "--source", "agent", "--tag", "alice")
    run("add", "--stdin", variant="--stdin", input='first\n{"text": "second", "at": "2025-03-01"}\n')
    run("show", fact["id"])
    run("recent")
    run("history", fact["id"])
    run("sessions")
    run("context", "tea")
    run("completions", "fish", vault=False)
    run("search", "tea")
    run("search", "--stdin", variant="--stdin", input="tea\n\n")
    run("reindex")
    run("dream", "--status", variant="--status")
    with FakeLLM(default=consolidate_everything("wiki/topics/tea.md", "Tea")) as fake:
        monkeypatch.setenv("MEMVAULT_MODEL", "openai/fake-dream")
        monkeypatch.setenv("MEMVAULT_API_BASE", fake.api_base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        report = run("dream")  # consolidates 2025-03-01 ("second")
    assert report["pages_created"] == 1 and report["batches"][0]["outcome"] == "ok"
    assert run("dream", "--undo", variant="--undo")["reverted"] == report["batches"][0]["commit"]
    run("status")
    run("doctor")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    run("remote set", str(remote))
    run("remote show")
    run("remote")  # the group alone answers as `remote show`
    run("sync")
    run("clone", str(remote), str(tmp_path / "clone"), vault=False)
    run("forget", fact["id"], "--reason", "test")
    run("purge", fact["id"], "--yes")

    wrong = []
    for command, results in seen.items():
        for variant, value in results:
            t = documented[command][variant]
            expr = t[len("stream of "):] if t.startswith("stream of ") else t
            values = value if t.startswith("stream of ") else [value]
            for v in values:
                wrong += problems(v, expr, types, f"{command} {variant}".strip())
    assert not wrong, "\n".join(wrong)
    not_run = {(c, v) for c, variants in documented.items() for v in variants} - \
        {(c, v) for c, results in seen.items() for v, _ in results}
    assert not not_run, f"documented but not exercised here: {not_run}"


def test_error_output_matches_the_documentation(cli):
    _, types = parse_doc()
    result = cli("show", "nosuchfact000000", "--json")
    assert result.exit_code == 3
    assert result.stdout == ""
    assert problems(json.loads(result.stderr), "Error", types) == []


def _documented_error_types() -> set[str]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    row = next(line for line in lines if line.startswith("| type | string | error class:"))
    return {name.strip() for name in row.split("error class:", 1)[1].strip(" |").split(",")}


def test_every_documented_error_type_is_a_class_that_names_itself():
    """Each name docs/json.md lists is an exception class a caller can catch, and the JSON its
    instance gives (`error_json`, the one place the envelope is built) names that very type and
    the exit code the README lists (LogLinesUnreadable was a string in the dream command)."""
    from memvault import errors
    from memvault.dream.undo import UndoRefused

    arguments = {"UnsafePath": ("wiki/a.md",), "VaultUnwritable": ("disk full while writing", "log.md"),
                 "Terminated": (), "Interrupted": ()}
    for name in sorted(_documented_error_types()):
        kind = UndoRefused if name == "UndoRefused" else getattr(errors, name, None)
        assert isinstance(kind, type) and issubclass(kind, BaseException), name
        error = kind(*arguments.get(name, ("what went wrong",)))
        detail = errors.error_json(error)["error"]
        assert detail["type"] == name and detail["exit_code"] == int(error.exit_code), detail
        assert detail["message"] == str(error) and detail["message"]


def test_error_types_are_the_documented_ones(cli, vault_dir, tmp_path):
    """A script matching `type` sees only the names docs/json.md lists: a model server that does
    not answer is an LLMError (it was ProviderUnavailable), a vault with an empty .git a NotAVault
    (BrokenRepository), as they are for every other cause of the same exit code."""
    import socket

    documented = _documented_error_types()
    with socket.socket() as s:  # a port nothing listens on: the provider cannot be reached
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cli("add", "Alice prefers green tea", "--at", "2026-01-02")
    env = {"MEMVAULT_MODEL": "openai/fake", "MEMVAULT_API_BASE": f"http://127.0.0.1:{port}/v1",
           "OPENAI_API_KEY": "sk-test"}
    from support.cli import run_memvault

    dream = run_memvault("dream", "--dry-run", "--json", "--vault", str(vault_dir), env=env, timeout=120)
    broken = tmp_path / "broken"
    assert cli("init", str(broken), vault=False).exit_code == 0
    shutil.rmtree(broken / ".git")
    (broken / ".git").mkdir()
    recent = run_memvault("recent", "--json", "--vault", str(broken))
    stopped = tmp_path / "stopped"  # a pending day whose log has a line that does not parse
    assert cli("init", str(stopped), vault=False).exit_code == 0
    assert cli("add", "Bob fixed the tap", "--at", "2026-01-02", "--vault", str(stopped), vault=False).exit_code == 0
    with open(stopped / "logs" / "2026" / "2026-01-02.md", "a") as log:
        log.write("a line typed by hand\n")
    halted = run_memvault("dream", "--dry-run", "--json", "--vault", str(stopped), env=env, timeout=120)
    for result, code in ((dream, 5), (recent, 3), (halted, 1)):
        assert result.returncode == code, result.stderr
        error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
        assert error["exit_code"] == code and error["type"] in documented, error

"""Help text, docs/cli.md and completions/ stay in step with the commands."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from memvault.cli.docs_gen import COMPLETION_FILES, ROOT, stale_files


def _commands():
    import typer
    from typer._click import Context

    from memvault.cli.app import app

    root = typer.main.get_command(app)
    found = [("memvault", root)]

    def walk(group, ctx, words):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            found.append((" ".join([*words, name]), command))
            if hasattr(command, "list_commands"):
                walk(command, Context(command, info_name=name, parent=ctx), [*words, name])

    walk(root, Context(root, info_name="memvault"), ["memvault"])
    return found


def test_every_command_has_help_with_an_example():
    """Every command and sub-command (groups too) has help text with an `Example:` line."""
    lacking = [name for name, command in _commands() if "Example:" not in (command.help or "")]
    assert not lacking, f"no 'Example:' in the help of: {', '.join(lacking)}"


def test_help_prints_the_example(cli):
    result = cli("context", "--help", vault=False)
    assert result.exit_code == 0
    assert "Example:" in result.stdout and "memvault context" in result.stdout


def test_generated_docs_and_completions_are_current():
    """Fails after a command or option changes until `python -m memvault.cli.docs_gen` is run."""
    assert stale_files() == [], "regenerate with: python -m memvault.cli.docs_gen"


def test_staleness_is_detected(tmp_path):
    for rel in ("docs/cli.md", *COMPLETION_FILES.values()):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    assert stale_files(tmp_path) == []
    fish = tmp_path / COMPLETION_FILES["fish"]
    fish.write_text(fish.read_text().replace(" -a sessions ", " -a session "))
    (tmp_path / "docs/cli.md").unlink()
    assert sorted(stale_files(tmp_path)) == sorted(["docs/cli.md", COMPLETION_FILES["fish"]])


def test_cli_md_lists_every_command():
    text = (ROOT / "docs/cli.md").read_text()
    for name, _ in _commands()[1:]:
        assert f"## {name}\n" in text


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completions_command_prints_the_shipped_script(cli, shell):
    result = cli("completions", shell, vault=False)
    assert result.exit_code == 0
    assert result.stdout == (ROOT / COMPLETION_FILES[shell]).read_text()


def test_completions_rejects_an_unknown_shell(cli):
    """Bad input tried: an unknown shell name; a missing shell argument."""
    result = cli("completions", "powershell", vault=False)
    assert result.exit_code == 2
    assert "unknown shell 'powershell'" in result.stderr
    assert cli("completions", vault=False).exit_code == 2


def _bash_complete(*words: str, cwd=None, env=None) -> list[str]:
    """What TAB offers after `memvault <words>` in a real bash with the shipped script."""
    import shlex

    quoted = " ".join(shlex.quote(w) for w in ["memvault", *words])
    script = (
        f"source {shlex.quote(str(ROOT / COMPLETION_FILES['bash']))}\n"
        f"COMP_WORDS=({quoted})\nCOMP_CWORD={len(words)}\n"
        "_memvault\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    out = subprocess.run([shutil.which("bash") or "bash", "--norc", "-c", script], capture_output=True, text=True,
                         check=True, cwd=cwd, env=env).stdout
    return [w for w in out.splitlines() if w]


@pytest.fixture
def recent_ids(cli, vault_dir):
    """Three facts, the middle one forgotten: TAB should offer the other two, newest first."""
    added = (("oldest: tea", "2026-01-02"), ("forgotten one", "2026-03-04"), ("newest: coffee", "2026-02-03"))
    ids = [cli("add", text, "--at", at).stdout.strip() for text, at in added]
    assert cli("forget", ids[1]).exit_code == 0
    return [ids[2], ids[0]]


def _no_python_path(tmp_path):
    """A PATH with only the small tools the completion function may use: no python, no memvault."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sh", "sed", "ls", "head", "xargs", "sort", "awk", "tr", "cut", "uname", "dirname", "cat"):
        found = shutil.which(tool)
        if found:
            (tools / tool).symlink_to(found)
    return str(tools)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_recent_fact_ids_without_python(recent_ids, vault_dir, tmp_path, hermetic_env):
    """Faults tried: a forgotten fact (not offered); the vault named by --vault before and after the
    command, by MEMVAULT_VAULT, by the current directory; no vault anywhere (nothing offered);
    a PATH where neither python nor memvault can be found."""
    import os

    env = {**os.environ, "PATH": _no_python_path(tmp_path)}
    env.pop("MEMVAULT_VAULT", None)
    vault = str(vault_dir)
    assert _bash_complete("show", "", cwd=vault_dir, env=env) == recent_ids
    assert _bash_complete("--vault", vault, "forget", "", env=env) == recent_ids
    assert _bash_complete("history", "--vault", vault, recent_ids[1][:12], env=env) == [recent_ids[1]]
    assert _bash_complete("show", "", env={**env, "MEMVAULT_VAULT": vault}) == recent_ids
    assert _bash_complete("show", "", cwd=tmp_path, env=env) == []  # no vault: the default one does not exist
    assert _bash_complete("show", "--j", cwd=vault_dir, env=env) == ["--json"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_completes_commands_options_and_values():
    assert _bash_complete("co") == ["context", "completions"]
    assert _bash_complete("recent", "--sess") == ["--session"]
    assert _bash_complete("add", "--category", "pre") == ["preference"]
    assert _bash_complete("completions", "") == ["bash", "zsh", "fish"]
    # a query word that happens to be a command name does not change the command
    assert "--budget" in _bash_complete("context", "add", "--bu")


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion_parses():
    subprocess.run(["zsh", "-n", str(ROOT / COMPLETION_FILES["zsh"])], check=True)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_fact_ids_read_the_vault_named_on_the_command_line(recent_ids, vault_dir):
    """The zsh script's functions (all but its last line, which needs the completion system), fed
    the command line as zsh splits it: `id:first line` pairs for _describe."""
    script = (f"eval \"$(sed '$d' {ROOT / COMPLETION_FILES['zsh']})\"\n"
              f"BUFFER=\"memvault --vault '{vault_dir}' show \"\n"
              'ids=(${(f)"$(_memvault_fact_ids ${(Q)${(z)BUFFER}})"}); print -l ${ids/ /:}\n')
    out = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [f"{recent_ids[0]}:newest: coffee", f"{recent_ids[1]}:oldest: tea"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion_parses():
    subprocess.run(["fish", "--no-execute", str(ROOT / COMPLETION_FILES["fish"])], check=True)


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_fact_ids_with_their_text(recent_ids, vault_dir):
    script = f"source {ROOT / COMPLETION_FILES['fish']}; complete -C 'memvault show --vault {vault_dir} '"
    out = subprocess.run(["fish", "-c", script], capture_output=True, text=True, check=True).stdout
    assert sorted(out.splitlines()) == sorted([f"{recent_ids[0]}\tnewest: coffee", f"{recent_ids[1]}\toldest: tea"])

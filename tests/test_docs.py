"""Help text, docs/cli.md and completions/ stay in step with the commands; the walkthrough's
install and completion steps run as written on a fresh HOME."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memvault.cli.docs_gen import COMPLETION_FILES, ROOT, stale_files


def _commands():
    import typer
    from typer import Context

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


@pytest.mark.parametrize("command", ["search", "add", "dream", "sync", "forget", "init"])
def test_help_paragraphs_wrap_at_the_terminal_width(command):
    """The docstrings are wrapped for the source; on an 80-column terminal a paragraph's lines
    fill the width instead of breaking after a few words where the source line ended. Each
    `Example:` keeps a line of its own."""
    from support.cli import run_memvault

    out = run_memvault(command, "--help", env={"COLUMNS": "80", "NO_COLOR": "1"}).stdout
    prose = [line.strip() for line in out.splitlines()
             if not line.lstrip().startswith(("│", "╭", "╰", "Usage:"))]
    paragraphs = "\n".join(prose).split("\n\n")
    early = [line for para in paragraphs for line in para.strip().splitlines()[:-1]
             if len(line) < 60 and not line.startswith("Example:")]
    assert len(paragraphs) > 2 and not early, early
    examples = [line for line in prose if "Example:" in line]
    assert examples and all(line.startswith("Example: memvault") and line.count("Example:") == 1
                            for line in examples), examples


def test_help_prints_every_word_of_its_text():
    """`--help` shows the text docs/cli.md shows: rich's markup once read `[dream] max_days`,
    `[llm] model` and `[default: ...]` as style tags and dropped them ("batches of  max_days",
    "Order of the listed facts .")."""
    from support.cli import run_memvault

    missing = []
    for name, command in _commands():
        out = run_memvault(*name.split()[1:], "--help", env={"COLUMNS": "2000", "NO_COLOR": "1"}).stdout
        shown = " ".join(out.replace("│", " ").split())
        texts = [command.help.split("Example:")[0], *(p.help for p in command.params if getattr(p, "help", None))]
        missing += [f"{name}: {t}" for t in (" ".join(t.split()) for t in texts) if t not in shown]
    assert not missing, missing


def test_help_lines_that_start_with_a_label_keep_their_line():
    from support.cli import run_memvault

    out = run_memvault("completions", "--help", env={"COLUMNS": "80", "NO_COLOR": "1"}).stdout
    starts = [line.strip().split(":")[0] for line in out.splitlines()]
    assert {"bash", "zsh", "fish", "Example"} <= set(starts), out


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


def test_cli_md_lists_the_options_of_memvault_itself():
    """`memvault --version` and `memvault --vault PATH <command>` were in no document."""
    text = (ROOT / "docs/cli.md").read_text()
    assert "| `--version` | Print the version and exit. |" in text
    assert "| `--vault <path>` | Vault directory for the command" in text


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


# -- the walkthrough, run as a newcomer would ------------------------------------------------------

WALKTHROUGH = ROOT / "docs" / "walkthrough.md"
INSTALL = "python3 -m venv ~/.memvault-venv && ~/.memvault-venv/bin/pip install ."


def _sh_blocks(path: Path) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", path.read_text(), flags=re.S)


def _fresh_home_env(home: Path) -> dict[str, str]:
    """A newcomer's environment: a HOME with nothing in it, no vault chosen, no XDG overrides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MEMVAULT_VAULT"))}
    return {**env, "HOME": str(home)}


def test_every_install_command_and_binary_path_in_the_docs_is_the_one_venv():
    """Faults looked for: `pip install memvault` (not published), a memvault binary outside
    ~/.memvault-venv (the crontab lines once used ~/.local/bin), an install line that differs.
    JSON client configs spell the home directory out (/home/me, macOS's /Users/me), since they
    expand nothing."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        assert not re.search(r"pipx? install memvault", text), doc
        for path in re.findall(r"[\w~${}./-]*/bin/memvault\b", text):
            assert path in ("~/.memvault-venv/bin/memvault", "$HOME/.memvault-venv/bin/memvault",
                            "/home/me/.memvault-venv/bin/memvault", "/Users/me/.memvault-venv/bin/memvault"), \
                (doc.name, path)
    assert _sh_blocks(WALKTHROUGH)[0].startswith(INSTALL + "   # from this checkout\n")
    assert _sh_blocks(ROOT / "README.md")[0].startswith(INSTALL + " && ")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_walkthrough_setup_and_completion_steps_run_on_a_fresh_home(tmp_path):
    """The walkthrough's first block after its install line, in bash -e on an empty HOME (the
    completion directory does not exist yet), with the memvault these tests run as the one in
    ~/.memvault-venv; then TAB in a new bash with the written completion file."""
    home = tmp_path / "home"
    (home / ".memvault-venv" / "bin").mkdir(parents=True)
    installed = Path(sys.executable).parent / "memvault"
    if not installed.is_file():
        pytest.skip(f"no memvault script beside {sys.executable} (install with the README's test command)")
    (home / ".memvault-venv" / "bin" / "memvault").symlink_to(installed)
    first, *steps = _sh_blocks(WALKTHROUGH)[0].splitlines()
    assert first.startswith(INSTALL)
    env = _fresh_home_env(home)
    done = subprocess.run(["bash", "-e", "-c", "\n".join(steps)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (home / "memory" / "memvault.toml").is_file() and (home / "memory" / ".git").is_dir()
    script = home / ".local" / "share" / "bash-completion" / "completions" / "memvault"
    assert script.read_text() == (ROOT / COMPLETION_FILES["bash"]).read_text()
    tab = ("source ~/.local/share/bash-completion/completions/memvault\n"
           "COMP_WORDS=(memvault ini); COMP_CWORD=1; _memvault; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    offered = subprocess.run(["bash", "--norc", "-c", tab], env=env, capture_output=True, text=True, check=True)
    assert offered.stdout.split() == ["init"]


def test_the_package_list_ships_every_package():
    """`pip install .` installs only the packages pyproject.toml lists (memvault.storage was once
    missing, so an installed memvault failed on import while the editable install worked)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "memvault").rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


@pytest.mark.skipif(os.environ.get("MEMVAULT_TESTS_INSTALL") != "1",
                    reason="a real `pip install .` takes a minute: CI runs it (.ci/run sets MEMVAULT_TESTS_INSTALL=1)")
def test_the_walkthrough_install_line_installs_a_working_memvault(tmp_path):
    """The install line verbatim, from a copy of the checkout's tracked files (so the build leaves
    nothing behind in the checkout), into the venv of a fresh HOME; then that memvault works."""
    checkout = tmp_path / "checkout"
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True,
                             check=True).stdout.split("\0")
    for rel in filter(None, tracked):
        if (ROOT / rel).is_file():
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, checkout / rel)
    home = tmp_path / "home"
    home.mkdir()
    install = _sh_blocks(WALKTHROUGH)[0].splitlines()[0]
    env = _fresh_home_env(home)
    done = subprocess.run(["bash", "-e", "-c", install], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    memvault = home / ".memvault-venv" / "bin" / "memvault"
    used = subprocess.run(["bash", "-e", "-c", f"{memvault} init ~/memory && {memvault} --vault ~/memory add "
                           f"'Alice prefers green tea' && {memvault} --vault ~/memory search tea --lexical"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert used.returncode == 0, used.stderr
    assert "Alice prefers green tea" in used.stdout

"""Vault creation, discovery, git isolation and identity."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from support.cli import Cli, run_memvault
from support.git import commit_count, git, is_clean

from memvault import NotAVault, Vault
from memvault.errors import ExitCode

LAYOUT = ["memvault.toml", "MEMORY.md", "index.md", "log.md", "schema.md", ".gitignore", ".gitattributes",
          "logs", "wiki/0_Inbox"]


def test_init_creates_the_layout_with_one_commit_and_a_clean_tree(tmp_path):
    result = Cli(None)("init", str(tmp_path / "v"), vault=False)
    assert result.exit_code == 0, result.stderr
    root = tmp_path / "v"
    assert result.stdout.strip() == str(root)
    for name in LAYOUT:
        assert (root / name).exists(), name
    attributes = (root / ".gitattributes").read_text()
    assert "logs/** merge=union" in attributes and "tombstones.jsonl merge=union" in attributes
    assert ".memvault/" in (root / ".gitignore").read_text()
    assert commit_count(root) == 1 and is_clean(root)


def test_init_refuses_a_non_empty_directory_and_is_a_no_op_on_a_vault(tmp_path):
    """Bad input: a directory holding someone's files."""
    (tmp_path / "notes.txt").write_text("mine")
    result = Cli(None)("init", str(tmp_path), vault=False)
    assert result.exit_code == ExitCode.USAGE
    assert "not empty" in result.stderr and result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]

    Vault.init(tmp_path / "v")
    again = Cli(None)("init", str(tmp_path / "v"), vault=False)
    assert again.exit_code == 0 and "already a vault" in again.stderr
    assert commit_count(tmp_path / "v") == 1


@pytest.mark.parametrize(("where", "message", "code"), [
    ("afile/sub", "cannot create a vault at {tmp}/afile/sub: {tmp}/afile is not a directory", ExitCode.USAGE),
    ("afile", "{tmp}/afile is not a directory; choose an empty or new directory", ExitCode.USAGE),
    ("/dev/null/vault", "cannot create a vault at /dev/null/vault: /dev/null is not a directory", ExitCode.USAGE),
    ("/proc/vault", "cannot create a vault at /proc/vault: No such file or directory", ExitCode.USAGE),
    ("a" * 300, "cannot create a vault at {tmp}/" + "a" * 300 + ": File name too long", ExitCode.USAGE),
])
def test_init_where_no_directory_can_be_made_names_the_path(tmp_path, where, message, code):
    """Bad input tried: a path under a regular file, a regular file, a path under /dev/null, a path in
    /proc (mkdir there fails with ENOENT) and a name of 300 characters; each was an unexpected
    NotADirectoryError, FileNotFoundError or OSError. Nothing is created."""
    (tmp_path / "afile").write_text("mine")
    result = run_memvault("init", where, cwd=tmp_path)
    assert result.returncode == code, result.stderr
    assert result.stderr == f"memvault: {message.format(tmp=tmp_path)}\n" and result.stdout == ""
    assert [p.name for p in tmp_path.iterdir()] == ["afile"] and (tmp_path / "afile").read_text() == "mine"


def test_a_vault_inside_another_repository_never_touches_it(tmp_path):
    parent = tmp_path / "project"
    parent.mkdir()
    subprocess.run(["git", "init", "-q", str(parent)], check=True)
    (parent / "README").write_text("parent")
    git(parent, "add", "README")
    git(parent, "commit", "-qm", "parent commit")
    # A parent hook that would fail any commit made through the parent repository.
    hook = parent / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    git(parent, "config", "user.name", "Parent Config Identity")

    vault = Vault.init(parent / "memory")
    vault.add("lives in its own repository")
    assert (parent / "memory" / ".git").is_dir()
    assert commit_count(parent) == 1
    assert git(parent, "status", "--porcelain") == "?? memory/\n"
    assert git(parent / "memory", "log", "-1", "--format=%an") == "Test Author\n"
    assert commit_count(parent / "memory") == 2


def test_discovery_order_flag_env_enclosing_default(tmp_path, monkeypatch, hermetic_env):
    flag, env, enclosing = (Vault.init(tmp_path / n).root for n in ("flag", "env", "enclosing"))
    (enclosing / "wiki" / "people").mkdir(exist_ok=True)
    monkeypatch.chdir(enclosing / "wiki" / "people")
    assert Vault.open().root == enclosing
    monkeypatch.setenv("MEMVAULT_VAULT", str(env))
    assert Vault.open().root == env
    assert Vault.open(flag).root == flag

    monkeypatch.delenv("MEMVAULT_VAULT")
    monkeypatch.chdir(tmp_path)
    result = Cli(None)("add", "first fact in the default vault", vault=False)
    assert result.exit_code == 0, result.stderr
    assert "created a new vault at" in result.stderr
    default = Vault.open()
    assert default.root == (hermetic_env / "data" / "memvault" / "vault").resolve()
    assert [f.text for f in default.recent()] == ["first fact in the default vault"]


def test_a_path_that_is_not_a_vault_is_a_clear_error(tmp_path):
    """Bad input: --vault pointing at a plain directory, empty and not."""
    (tmp_path / "plain").mkdir()
    result = Cli(None)("recent", "--vault", str(tmp_path / "plain"), vault=False)
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "is not a memvault vault" in result.stderr and result.stderr.count("\n") == 1
    assert f"memvault init {tmp_path / 'plain'}" in result.stderr  # empty: init would work there
    assert list((tmp_path / "plain").iterdir()) == []
    with pytest.raises(NotAVault):
        Vault.open(tmp_path / "plain")
    # a folder of other things: init would refuse it, so the advice is not to init it
    (tmp_path / "plain" / "notes.txt").write_text("mine\n")
    result = Cli(None)("recent", "--vault", str(tmp_path / "plain"), vault=False)
    assert result.exit_code == ExitCode.NOT_FOUND and f"init {tmp_path / 'plain'}" not in result.stderr
    assert "point --vault" in result.stderr
    refused = Cli(None)("init", str(tmp_path / "plain"), vault=False)
    assert refused.exit_code != 0


def test_works_without_a_git_identity_and_honours_one_when_configured(tmp_path, monkeypatch, hermetic_env):
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(key)
    vault = Vault.init(tmp_path / "v")
    vault.add("no identity anywhere")
    assert git(vault.root, "log", "-1", "--format=%an").strip() == "memvault"
    assert Vault.open(vault.root).git.identity().fallback is True

    (hermetic_env / "gitconfig").write_text("[user]\n\tname = Real Person\n\temail = real@example.test\n")
    again = Vault.open(vault.root)
    again.add("now with an identity")
    assert git(vault.root, "log", "-1", "--format=%an <%ae>").strip() == "Real Person <real@example.test>"
    assert again.git.identity().fallback is False
    # The fallback was never written into the vault's config.
    assert "[user]" not in (vault.root / ".git" / "config").read_text()


def test_import_of_the_cli_stays_light():
    code = ("import sys, memvault.cli.app; heavy = [m for m in ('litellm', 'fastembed', 'onnxruntime', 'tantivy', "
            "'numpy') if m in sys.modules]; print(heavy)")
    out = subprocess.run([__import__("sys").executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_exit_codes_match_the_readme_table():
    """Scripts rely on the documented codes: the README table and the enum must agree."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = dict((name, int(code)) for code, name in re.findall(r"^\| (\d+) \| ([A-Z_]+) \|", readme, flags=re.M))
    assert table == {c.name: int(c) for c in ExitCode}


def test_python_module_entry_point(tmp_path):
    out = subprocess.run([__import__("sys").executable, "-m", "memvault", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("memvault ")


def test_template_is_what_init_copies(tmp_path):
    repo_template = Path(__file__).resolve().parent.parent / "vault-template"
    root = Vault.init(tmp_path / "v").root
    for path in repo_template.rglob("*"):
        if path.is_file():
            assert (root / path.relative_to(repo_template)).read_bytes() == path.read_bytes()


def test_a_vault_kept_open_answers_from_any_thread(tmp_path):
    """Concurrency tried: a long-lived Vault in an async agent: blocking calls go to `asyncio.to_thread`, a pool
    thread that changes from call to call. Every search after the first one's thread used to fail
    with sqlite's "SQLite objects created in a thread can only be used in that same thread" (the
    embedding cache's connection), as soon as a new fact needed a vector."""
    import asyncio

    vault = Vault.init(tmp_path / "v")
    first = vault.add("Alice prefers green tea")
    assert [hit.id for hit in vault.search("green tea")] == [first.id]

    async def agent() -> list[list[str]]:
        found = []
        for n in range(3):
            fact = await asyncio.to_thread(vault.add, f"Bob drinks coffee number {n}")
            hits = await asyncio.to_thread(vault.search, f"coffee number {n}", min_score=0)
            found.append(fact.id in {hit.id for hit in hits})
            bundle = await asyncio.to_thread(vault.context, "coffee", budget=400)
            found.append(fact.id in bundle.markdown)
        return found

    assert asyncio.run(agent()) == [True] * 6

    # Shared by threads at once, its calls take turns (they failed now and then with sqlite's
    # "cannot commit transaction - SQL statements in progress" or "database table is locked").
    from concurrent.futures import ThreadPoolExecutor

    def one_agent(n: int) -> bool:
        found = True
        for k in range(6):
            fact = vault.add(f"agent {n} learned thing {k}")
            found &= fact.id in {hit.id for hit in vault.search(f"agent {n} thing {k}", min_score=0)}
            vault.context("agent", budget=300)
        return found

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one_agent, range(4))) == [True] * 4
    vault.close()


def test_a_vault_inside_another_vault_is_refused_and_one_put_there_by_hand_is_not_read_as_pages(tmp_path):
    """`init a/wiki/nested` was accepted; the nested vault's logs and private facts then became pages
    of the outer vault, in its search and in `context`."""
    outer = tmp_path / "a"
    assert run_memvault("init", str(outer)).returncode == 0
    assert run_memvault("add", "outer fact about tea", "--vault", str(outer)).returncode == 0
    head = git(outer, "rev-parse", "HEAD")
    for args in (["init", str(outer / "wiki" / "nested")], ["clone", str(outer), str(outer / "logs" / "inner")]):
        done = run_memvault(*args)
        assert done.returncode == ExitCode.USAGE, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and f"inside the vault {outer}" in done.stderr
    assert not (outer / "wiki" / "nested").exists() and not (outer / "logs" / "inner").exists()
    assert git(outer, "rev-parse", "HEAD") == head and is_clean(outer)

    nested = outer / "wiki" / "nested"   # made by hand, with plain git: memvault still reads it as its own
    subprocess.run(["git", "clone", "-q", str(outer), str(nested)], check=True)
    assert run_memvault("add", "nested private fact zebra", "--vault", str(nested)).returncode == 0
    found = run_memvault("search", "zebra", "--lexical", "--json", "--vault", str(outer))
    assert found.returncode == 0 and found.stdout.strip() == "[]", found.stdout
    status = run_memvault("status", "--json", "--vault", str(outer))
    assert status.returncode == 0 and json.loads(status.stdout)["pages"] == 0, status.stdout

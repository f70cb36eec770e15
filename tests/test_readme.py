"""The README's promises that CI depends on."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _code_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_opens_with_an_install_command_and_a_test_command():
    install, test = _code_blocks()[:2]
    assert "pip install ." in install and "memvault add" in install and "memvault search" in install
    assert "pytest" in test and "[test]" in test


def test_ci_runs_exactly_the_readme_test_command():
    test_command = _code_blocks()[1].strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_the_readme_is_a_first_hour_and_links_to_the_rest():
    """Seen: about 730 lines, benchmark tables and design decisions inline, and a walk-through
    repeated word for word in docs/. It holds what a first hour needs; every page it names is there,
    and every page of docs/ is named."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)[#)]", text))
    assert {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")} == linked
    walkthrough = (ROOT / "docs" / "walkthrough.md").read_text()
    repeated = [p for p in text.split("\n\n") if len(p) > 200 and p in walkthrough]
    assert repeated == []


# The tour's commands a test machine cannot run: an LLM (dream, and why, which reads what dream
# wrote), a network remote, a server that waits for a client, a host's config, another tool's memories.
NOT_HERE = ("memvault dream", "memvault why", "memvault remote", "memvault clone", "memvault mcp",
            "memvault import", "memvault install")


def test_the_tour_runs_as_written_in_a_fresh_home(hermetic_env):
    """A stranger pastes the tour into a shell with memvault on PATH and no git identity: every line
    it can run here exits 0, in order, sharing the shell's variables ($id) as a paste does."""
    import os
    import subprocess
    import sys

    tour = next(block for block in _code_blocks() if block.startswith("memvault init ~/memory"))
    lines = [line for line in tour.splitlines() if line.strip()]
    runnable = [line for line in lines if not any(word in line.split("#", 1)[0] for word in NOT_HERE)]
    assert len(lines) - len(runnable) == 8  # a new line of the tour is run here unless listed above
    script = "\n".join(f"{line}\ntest $? -eq 0 || {{ echo 'failed: the tour line {n}' >&2; exit 1; }}"
                       for n, line in enumerate(runnable, start=1))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", script], cwd=hermetic_env, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Bob is on call" in done.stdout and "wrong person" not in done.stderr

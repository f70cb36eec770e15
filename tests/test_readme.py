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

"""The Python examples in docs/api.md run as written (those that need no model server or remote)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"
RUNNABLE = ("Opening", "Remembering", "Reading", "Searching", "Context")


def _examples() -> list[tuple[str, str]]:
    found = []
    for section in re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]:
        title = section.split("\n", 1)[0].strip()
        if title.startswith(RUNNABLE):
            found += [(title, code) for code in re.findall(r"```python\n(.*?)```", section, flags=re.S)]
    return found


def test_api_examples_run(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec("from memvault import Vault, InvalidInput, NotFound", namespace)  # the doc's opening import
    examples = _examples()
    assert {title for title, _ in examples} >= {"Opening", "Remembering", "Reading", "Searching"}
    for title, code in examples:
        try:
            exec(compile(code, f"docs/api.md ({title})", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"docs/api.md example in '{title}' fails: {type(e).__name__}: {e}") from e

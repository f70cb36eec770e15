"""docs/walkthrough.md as a newcomer runs it: every `sh` block, in order, on an empty home.

Each block runs in bash -e with the `export` lines of the blocks before it on the same machine
(a shell session, as a reader's). The install line is replaced by memvault as these tests run it
(placed in ~/.memvault-venv); GitHub by a local bare repository; the model's server by the fake
one the dream tests use; a block marked `<!-- walkthrough: second machine -->` runs in a second
home directory, and one marked `not run by the tests` is left out.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fake_llm import FakeLLM, consolidate_everything
from test_docs import INSTALL, WALKTHROUGH, _fresh_home_env

GITHUB = "git@github.com:me/memory.git"
_BLOCK = re.compile(r"(?:<!-- walkthrough: (?P<mark>[^>]*?) -->\n)?```sh\n(?P<code>.*?)\n```", re.S)


def _blocks() -> list[tuple[str, str]]:
    return [(found["mark"] or "", found["code"]) for found in _BLOCK.finditer(WALKTHROUGH.read_text())]


def _home(path: Path) -> Path:
    installed = Path(sys.executable).parent / "memvault"
    if not installed.is_file():
        pytest.skip(f"no memvault script beside {sys.executable} (install with the README's test command)")
    (path / ".memvault-venv" / "bin").mkdir(parents=True)
    (path / ".memvault-venv" / "bin" / "memvault").symlink_to(installed)
    return path


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_every_block_of_the_walkthrough_runs_as_written(tmp_path):
    blocks = _blocks()
    assert blocks[0][1].startswith(INSTALL) and [mark for mark, _ in blocks].count("second machine") == 1
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    homes = {"": _home(tmp_path / "desktop"), "second machine": _home(tmp_path / "laptop")}
    said: dict[str, list[str]] = {"": [], "second machine": []}
    exports: dict[str, list[str]] = {"": [], "second machine": []}
    with FakeLLM(default=consolidate_everything()) as model:
        for number, (mark, code) in enumerate(blocks):
            if mark.startswith("not run by the tests"):
                continue
            lines = code.replace(GITHUB, str(remote)).splitlines()
            if number == 0:
                lines = lines[1:]  # the install line: memvault is already in ~/.memvault-venv
            env = {**_fresh_home_env(homes[mark]), "MEMVAULT_API_BASE": model.api_base}
            # (the step's Python and cron lines are not sh; its exports carry on, as in one shell)
            script = "\n".join([*exports[mark], *lines])
            done = subprocess.run(["bash", "-e", "-c", script], cwd=homes[mark], env=env, capture_output=True,
                                  text=True, timeout=300)
            assert done.returncode == 0, f"block {number + 1}:\n{code}\n{done.stderr[-3000:]}"
            said[mark].append(done.stdout)
            exports[mark] += [line for line in lines if line.startswith("export ")]
            if number == 0:  # the second machine is set up as in step 1 too (PATH), its vault its own
                exports["second machine"] += [line for line in exports[""] if line.startswith("export PATH=")]
        assert model.requests, "the dream step never reached the model"
    desktop = homes[""] / "memory"
    assert list((desktop / "wiki").rglob("*.md")) and "watermark=" in (desktop / "log.md").read_text()
    assert "Written on the laptop" in said[""][-1]  # the first machine's last sync brought it
    assert (homes[""] / "prompt-memory.md").read_text().strip()

"""A crowd of writer processes on one vault: nobody is refused, nothing is lost or doubled.

The children share one bytecode cache (tests/support/process.py), as an installed memvault has its
.pyc files, so the test measures adds, not compiling memvault 1,000 times.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.cli import run_memvault
from support.git import assert_fsck_clean, git, is_clean
from support.process import compiled_children  # noqa: F401  (fixture)

from memvault import Vault


@pytest.mark.slow
def test_forty_processes_adding_25_facts_each_are_all_committed_once(vault_dir):
    """Fault tried: 40 concurrent writer processes x 25 `memvault add` each, default lock timeout,
    on a 2-core machine: the load that refused 9-630 adds with a plain 10 s lock."""
    assert run_memvault("add", "warm the bytecode cache", "--vault", str(vault_dir)).returncode == 0

    def writer(w: int) -> list[tuple[int, str]]:
        done = []
        for i in range(25):
            result = run_memvault("add", f"writer {w} fact {i}", "--vault", str(vault_dir), timeout=300)
            done.append((result.returncode, result.stderr))
        return done

    started = time.monotonic()
    with ThreadPoolExecutor(40) as pool:
        results = [r for batch in pool.map(writer, range(40)) for r in batch]
    elapsed = time.monotonic() - started
    refused = [err for code, err in results if code != 0]
    assert refused == [], f"{len(refused)} of 1000 adds failed, e.g. {refused[0]}"
    # Waiting writers say so (one notice line), and nothing else reaches stderr.
    noise = {line for _code, err in results for line in err.splitlines() if "waiting for the write lock" not in line}
    assert noise == set()

    facts = [f for f in Vault.open(vault_dir).iter_facts() if f.text.startswith("writer ")]
    assert sorted(f.text for f in facts) == sorted(f"writer {w} fact {i}" for w in range(40) for i in range(25))
    assert len({f.id for f in facts}) == 1000
    messages = git(vault_dir, "log", "--format=%B")
    assert all(f.id in messages for f in facts), "a group commit's message names each of its facts"
    for fact in random.Random(1).sample(facts, 3):
        history = json.loads(run_memvault("history", fact.id, "--json", "--vault", str(vault_dir)).stdout)
        assert history, f"history finds no commit for {fact.id}"
    assert is_clean(vault_dir)
    assert_fsck_clean(vault_dir)
    print(f"\n40 x 25 adds: {elapsed:.1f} s, {1000 / elapsed:.1f} adds/s, "
          f"{int(git(vault_dir, 'rev-list', '--count', 'HEAD'))} commits")


@pytest.mark.slow
def test_writers_killed_at_random_in_a_crowd_never_lose_or_double_an_acknowledged_fact(vault_dir):
    """Fault tried: 12 concurrent writers; a third of their adds get SIGKILL at a seeded random
    moment, committers (holding queued facts of others) included."""
    rng = random.Random(17)
    plans = [[(rng.random() < 0.35, rng.uniform(0.05, 1.0)) for _ in range(8)] for _ in range(12)]

    def writer(w: int) -> list[tuple[str, int]]:
        outcomes = []
        for i, (kill, after) in enumerate(plans[w]):
            text = f"crowd {w} {i}"
            proc = subprocess.Popen([sys.executable, "-m", "memvault", "add", text, "--vault", str(vault_dir)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    env=os.environ)
            if kill:
                time.sleep(after)
                proc.send_signal(signal.SIGKILL)
            outcomes.append((text, proc.wait(timeout=300)))
        return outcomes

    with ThreadPoolExecutor(12) as pool:
        outcomes = [o for batch in pool.map(writer, range(12)) for o in batch]
    acknowledged = {text for text, code in outcomes if code == 0}
    assert all(code in (0, -signal.SIGKILL) for _text, code in outcomes)
    assert run_memvault("add", "after the crowd", "--vault", str(vault_dir)).returncode == 0
    texts = [f.text for f in Vault.open(vault_dir).iter_facts()]
    assert len(texts) == len(set(texts)), "a fact was committed twice"
    assert acknowledged <= set(texts)
    assert 0 < len(acknowledged) < len(outcomes)
    assert is_clean(vault_dir) and list((vault_dir / ".memvault" / "queue").iterdir()) == []
    assert_fsck_clean(vault_dir)

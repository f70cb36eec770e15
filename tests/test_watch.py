"""A warm process skips the per-search stat of every file while its folder watches report nothing:
every change made before a search must still be in that search.

Changes tried, each by another process or by hand, between two searches of one warm Vault: an add,
a backdated add that creates a new year folder, a hand edit of an old day's log (in place, and by
an editor's write-and-rename), a forget, a wiki page renamed into a new zone folder, a deleted
log; MEMVAULT_WATCH=0, which stats every file on every search; and no watch to be had (the kernel's
inotify limits reached).
"""

from __future__ import annotations

import os
import sys

import pytest
from support.cli import run_memvault

from memvault import Vault
from memvault.index.search import engine

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="folder watches use inotify (Linux)")


def ids(hits) -> set[str]:
    return {hit.id for hit in hits}


@pytest.fixture
def warm(vault_dir, monkeypatch):
    """A Vault that has searched twice (so it watches), and a count of the file scans it makes."""
    vault = Vault.open(vault_dir)
    vault.add("Ana drinks green tea every morning", at="2025-03-02")
    vault.search("tea")
    vault.search("tea")
    index = engine(vault.storage)
    assert index._watch is not None
    scans = []
    real_scan = index.scan
    monkeypatch.setattr(index, "scan", lambda generation: scans.append(1) or real_scan(generation))
    yield vault, scans
    vault.close()


def test_a_warm_search_with_nothing_changed_stats_no_file(warm):
    vault, scans = warm
    for _ in range(5):
        assert vault.search("green tea")
    assert scans == []


def test_every_change_made_before_a_search_is_in_it(warm, vault_dir):
    vault, scans = warm
    added = run_memvault("add", "Ben repairs vintage bicycles", "--vault", str(vault_dir))
    assert added.returncode == 0, added.stderr
    assert [h.text for h in vault.search("vintage bicycles")] == ["Ben repairs vintage bicycles"]

    old = run_memvault("add", "Caro moved to Lyon", "--at", "2019-05-01", "--vault", str(vault_dir))
    assert old.returncode == 0, old.stderr
    assert (vault_dir / "logs" / "2019").is_dir()
    assert [h.text for h in vault.search("Lyon", include_all=True)] == ["Caro moved to Lyon"]

    log = vault_dir / "logs" / "2019" / "2019-05-01.md"
    log.write_text(log.read_text().replace("Lyon", "Grenoble"))  # a hand edit, in place
    assert [h.text for h in vault.search("Grenoble", include_all=True)] == ["Caro moved to Grenoble"]
    assert vault.search("Lyon", include_all=True) == []
    edited = log.with_name(".2019-05-01.md.swp")  # an editor's write-and-rename
    edited.write_text(log.read_text().replace("Grenoble", "Annecy"))
    os.replace(edited, log)
    assert [h.text for h in vault.search("Annecy", include_all=True)] == ["Caro moved to Annecy"]

    tea = vault.search("green tea")[0]
    forgot = run_memvault("forget", tea.id, "--reason", "wrong", "--vault", str(vault_dir))
    assert forgot.returncode == 0, forgot.stderr
    assert tea.id not in ids(vault.search("green tea", min_score=0))

    zone = vault_dir / "wiki" / "places"
    zone.mkdir(parents=True)
    draft = vault_dir / "wiki" / "draft.tmp"
    draft.write_text("---\ntitle: Annecy\n---\n# Annecy\n\nA lake town in the Alps.\n")
    os.replace(draft, zone / "annecy.md")
    assert any(h.kind != "fact" for h in vault.search("lake town in the Alps"))

    log.unlink()
    assert all(h.kind != "fact" for h in vault.search("Annecy", include_all=True))
    assert len(scans) >= 7  # each change was noticed and scanned for


def test_without_watches_every_search_stats_every_file(vault_dir, monkeypatch):
    monkeypatch.setenv("MEMVAULT_WATCH", "0")
    vault = Vault.open(vault_dir)
    vault.add("Ana drinks green tea every morning")
    for _ in range(3):
        vault.search("tea")
    assert engine(vault.storage)._watch is None
    vault.close()


def test_when_no_watch_can_be_had_every_search_still_sees_every_change(vault_dir, monkeypatch):
    """Fault tried: the inotify instance or watch limit reached (EMFILE/ENOSPC from the kernel)."""
    import memvault.index.watch as watch_module

    def refuse(self, root):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(watch_module.FolderWatch, "__init__", refuse)
    vault = Vault.open(vault_dir)
    vault.add("Ana drinks green tea every morning")
    for _ in range(3):
        assert vault.search("green tea")
    assert engine(vault.storage)._watch is None
    added = run_memvault("add", "Ben repairs vintage bicycles", "--vault", str(vault_dir))
    assert added.returncode == 0, added.stderr
    assert [h.text for h in vault.search("vintage bicycles")] == ["Ben repairs vintage bicycles"]
    vault.close()

"""Search never shows what it should not, and never drops silently what it cannot read."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from support.cli import Cli

from memvault import Vault


def _page(vault, kept_id: str, gone_id: str) -> None:
    page = vault.root / "wiki" / "people" / "bob.md"
    page.write_text(textwrap.dedent(f"""\
        ---
        title: Bob
        zone: people
        tags: [bob]
        created: 2026-11-01
        updated: 2026-11-01
        sources: [{kept_id}, {gone_id}]
        ---
        # Bob

        ## Contact
        - Bob plays the cello in a string quartet.[^{kept_id}]
        - Bob's phone number is 555-0100.[^{gone_id}]
        """))
    vault.git.commit(["wiki"], "dream: 2026-11-01..2026-11-01 — 1 created, 0 updated, 0 conflict, 0 noop")


def test_forgetting_a_cited_fact_withholds_the_page_at_once(vault):
    """The page's statement, but also its title and slug, may repeat the forgotten fact: the whole
    page leaves search until dream's scrub rewrites it; its live fact is found as a fact."""
    kept = vault.add("Bob plays the cello in a string quartet")
    gone = vault.add("Bob's phone number is 555-0100")
    _page(vault, kept.id, gone.id)
    section = "wiki/people/bob.md#contact"
    assert any(h.id == section and "555-0100" in h.text for h in vault.search("phone number 555-0100"))

    vault.forget(gone.id, reason="wrong number")

    hits = vault.search("phone number 555-0100", include_all=True, min_score=0)
    assert all("555-0100" not in h.text for h in hits)
    assert gone.id not in [h.id for h in hits]
    cello = vault.search("cello quartet", min_score=0)
    assert not any(h.kind == "page" for h in cello) and cello[0].id == kept.id
    # The withholding is in the index, not the file: the page waits for dream's rewrite.
    assert "555-0100" in (vault.root / "wiki" / "people" / "bob.md").read_text()


def test_the_statement_stays_hidden_after_a_full_rebuild(vault):
    kept = vault.add("Bob plays the cello in a string quartet")
    gone = vault.add("Bob's phone number is 555-0100")
    _page(vault, kept.id, gone.id)
    vault.forget(gone.id)
    vault.reindex(clear=True)
    assert all("555-0100" not in h.text for h in vault.search("phone number 555-0100", include_all=True))


def test_a_hand_written_line_without_metadata_is_told_not_silently_skipped(vault_dir):
    told: list[str] = []
    vault = Vault.open(vault_dir, notify=told.append)
    vault.add("Carol loves climbing")
    log = vault.root / vault.recent()[0].path
    with open(log, "a", encoding="utf-8") as f:
        f.write("- Carol loves hiking\n")
    vault.search("hiking")
    assert any("1 line(s) in the daily logs are not facts memvault can read" in t for t in told)
    assert any(f"{vault.recent()[0].path}:4" in t for t in told)
    told.clear()
    vault.search("hiking")
    assert not any("not facts" in t for t in told)  # told when the file changes, not on every search


def test_the_library_prints_nothing_the_cli_shows_its_notices(vault_dir, capsys):
    """Notices reach the front end through the callback; the Python API alone prints nothing."""
    vault = Vault.open(vault_dir)
    vault.add("Carol loves climbing")
    with open(vault.root / vault.recent()[0].path, "a", encoding="utf-8") as f:
        f.write("- Carol loves hiking\n")
    vault.search("hiking")
    assert capsys.readouterr() == ("", "")
    with open(vault.root / vault.recent()[0].path, "a", encoding="utf-8") as f:
        f.write("- Carol loves rowing\n")
    result = Cli(vault_dir)("search", "rowing")
    assert "not facts memvault can read" in result.stderr


@pytest.mark.real_model
def test_a_huge_fact_from_a_hand_edit_is_searched_in_bounded_memory(vault):
    """`add` refuses a fact over 1 MiB, but a log edited by hand or pulled from a remote may hold
    one of 20 MB: the next search (a fresh process, real model) finds it and peaks well under a
    gigabyte (it took 3.2 GB and 35 s for 20 MB while the tokenizer split it all)."""
    vault.add("Carol keeps bees on the roof", at="2026-11-20T09:00:00")
    log = vault.root / "logs" / "2026" / "2026-11-20.md"
    huge = "- Dmitri pasted the whole server log " + "lorem ipsum dolor sit amet " * 750_000
    log.write_text(log.read_text() + huge + ' <!-- mv {"id":"1k0yyd0000000002","at":"2026-11-20T10:00:00+00:00"} -->\n')
    # A wrapper whose one child is the search: its children's peak RSS is the search's.
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
               " peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
               " print(done.returncode, peak, done.stdout.count('1k0yyd'))")
    done = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "memvault", "search",
                           "Dmitri server log", "--json", "--min-score", "0", "--vault", str(vault.root)],
                          capture_output=True, text=True, timeout=300)
    status, peak_kib, found = map(int, done.stdout.split())
    assert status == 0 and found == 1, done.stderr
    assert peak_kib < 1024 * 1024, f"search peaked at {peak_kib // 1024} MiB"

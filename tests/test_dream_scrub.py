"""A forgotten fact a page already cites: forget names the page, doctor warns, the next dream scrubs it.

Through litellm's real call path against the scripted local server. Bad inputs tried: a scrub
answer without a new title, one that leaves a citing page out, one that creates a page; a scrub
that fails max_retries times in a row (the runner then keeps the stripped body itself). Every
request is checked for what the forgotten fact said: the model never receives it.
"""

from __future__ import annotations

import json

import pytest
from support.dream import answer, consolidated, dream, log_lines, request_data
from support.fake_llm import fake_llm  # noqa: F401  (fixture: fake)
from support.git import commit_count, git, is_clean

from memvault.dream.undo import UndoRefused
from memvault.storage.wiki import read_page

ALICE = "wiki/people/alice.md"
COFFEE = "wiki/people/coffee.md"


def consolidated_pages(vault, fake):
    """Alice's page cites tea and coffee; a second page cites only coffee; MEMORY.md mentions coffee."""
    tea = vault.add("Alice prefers green tea", at="2026-11-01T09:00:00", category="preference")
    coffee = vault.add("Alice secretly hates coffee", at="2026-11-01T10:00:00")
    fake.script = [answer(
        pages=[{"action": "create", "path": ALICE, "title": "Alice",
                "body": f"## Drinks\n\n- Prefers green tea [^{tea.id}]\n- Secretly hates coffee [^{coffee.id}]"},
               {"action": "create", "path": COFFEE, "title": "Coffee", "body": f"Alice hates it [^{coffee.id}]."}],
        facts=[consolidated(tea.id, ALICE), consolidated(coffee.id, ALICE)],
        memory=[{"text": "Alice secretly hates coffee", "page": ALICE}, {"text": "Coffee feelings", "page": COFFEE}],
    )]
    assert dream(vault, fake).ok
    return tea, coffee


def rewrite_alice(tea_id: str, title: str = "Alice") -> str:
    return answer(pages=[{"action": "update", "path": ALICE, "title": title,
                          "body": f"## Drinks\n\n- Prefers green tea [^{tea_id}]"}])


def doctor_check(cli) -> dict:
    checks = {c["name"]: c for c in json.loads(cli("doctor", "--json").stdout)["checks"]}
    return checks["pages citing forgotten facts"]


def test_forget_notice_doctor_warning_then_one_scrub_commit_leaves_no_trace(vault, fake, cli):
    tea, coffee = consolidated_pages(vault, fake)

    forgot = cli("forget", coffee.id, "--reason", "private")
    assert forgot.exit_code == 0 and forgot.stdout.strip() == f"forgot {coffee.id}"
    assert f"cited by {ALICE}, {COFFEE}" in forgot.stderr and "next `memvault dream` rewrites" in forgot.stderr
    again = json.loads(cli("forget", coffee.id, "--json").stdout)
    assert again["already_forgotten"] and again["cited_by"] == [ALICE, COFFEE]
    warned = doctor_check(cli)
    assert warned["status"] == "warn" and "next `memvault dream` rewrites" in warned["message"]
    assert vault.dream_status()["scrub_pages"] == [ALICE, COFFEE]
    assert json.loads(cli("status", "--json").stdout)["pending"]["scrub_pages"] == 2
    assert warned["details"] == [f"{ALICE} cites {coffee.id}", f"{COFFEE} cites {coffee.id}"]

    fake.script = [rewrite_alice(tea.id), rewrite_alice(tea.id)]
    before = commit_count(vault.root)
    dry = dream(vault, fake, dry_run=True).batches[0]
    assert (dry.label, dry.outcome, dry.updated, dry.removed) == ("scrub", "proposed", [ALICE], [COFFEE])
    assert commit_count(vault.root) == before and is_clean(vault.root)
    assert commit_count(vault.root) == before and len(fake.requests) == 2  # the first dream's, the dry run's
    # Even a quiet night (the cron line's --min-facts) scrubs: forgetting is a promise.
    report = dream(vault, fake, min_facts=5)

    assert report.ok and report.gated and report.to_dict()["deferred"] == []
    assert vault.watermark.isoformat() == "2026-11-01"
    assert [(b.label, b.outcome, b.updated, b.removed) for b in report.batches] == [("scrub", "ok", [ALICE], [COFFEE])]
    sent = request_data(fake.requests[-1])
    assert [p["path"] for p in sent["pages"]] == ["wiki/people/page-1.md"] and "forgotten_ids" not in sent
    assert "title" not in sent["pages"][0] and "Prefers green tea" in sent["pages"][0]["body"]
    assert [f["text"] for f in sent["facts"]] == [tea.text]
    # nothing the forgotten fact said reaches the model: not its text, its id, a page line, a
    # MEMORY.md line written from it ("Alice secretly hates coffee"), nor the removed page's title
    assert "coffee" not in json.dumps(fake.requests[-1]).lower() and coffee.id not in json.dumps(fake.requests[-1])
    assert commit_count(vault.root) == before + 1 and is_clean(vault.root)
    assert git(vault.root, "log", "-1", "--format=%s").strip() == (
        "dream: scrub — 1 page rewritten without forgotten facts, 1 removed")
    assert " dream ok scrub · 1 page(s) rewritten, 1 removed" in log_lines(vault)[-1]
    page = read_page(vault.root, ALICE)
    assert coffee.id not in (vault.root / ALICE).read_text() and page.sources == [tea.id]
    assert not (vault.root / COFFEE).exists() and COFFEE not in (vault.root / "index.md").read_text()
    memory = (vault.root / "MEMORY.md").read_text()
    assert "coffee" not in memory.lower() and f"- Alice — [Alice]({ALICE})" in memory  # a plain link stays
    assert doctor_check(cli)["status"] == "ok"
    assert cli("doctor").exit_code == 0
    assert vault.dream_status()["scrub_pages"] == []

    assert dream(vault, fake).caught_up and len(fake.requests) == 3  # nothing left to scrub
    with pytest.raises(UndoRefused, match="cannot undo"):
        vault.dream_undo()  # undo never brings the forgotten statements back


def test_scrub_answers_that_keep_the_forgotten_fact_are_rejected_then_the_runner_strips(vault, fake):
    tea, coffee = consolidated_pages(vault, fake)
    vault.forget(coffee.id)
    alice_before = (vault.root / ALICE).read_text()
    untitled = answer(pages=[{"action": "update", "path": ALICE, "body": f"- Prefers green tea [^{tea.id}]"}])
    omitted = answer(pages=[])
    created = answer(pages=[{"action": "create", "path": "wiki/people/new.md", "body": f"x [^{tea.id}]"}])
    fake.script = [untitled] * 3 + [omitted] * 3 + [created] * 3  # each answer, and its two repair turns

    for expected in ("needs a new title", "still cites forgotten fact"):
        head = git(vault.root, "rev-parse", "HEAD").strip()
        report = dream(vault, fake)
        assert not report.ok and expected in report.error
        # nothing but the log line was written; the page stays until a valid rewrite
        assert git(vault.root, "diff", "--name-only", head, "HEAD").split() == ["log.md"]
        assert (vault.root / ALICE).read_text() == alice_before and is_clean(vault.root)
        assert "dream failed scrub · attempt" in log_lines(vault)[-1]
    before = commit_count(vault.root)
    report = dream(vault, fake)
    assert report.ok and "only rewrites the pages it was given" in report.batches[0].reason
    assert commit_count(vault.root) == before + 1

    # the third rejection was the last allowed: the runner dropped the citing lines itself, and
    # the title and slug (which may repeat the fact) gave way to a neutral one
    lines = log_lines(vault)
    assert "dream failed scrub · attempt 3/3" in lines[-2] and "the runner removed the citing lines" in lines[-1]
    moved = "wiki/people/notes-rewritten-after-a-forget.md"
    page = read_page(vault.root, moved)
    assert page.body == f"## Drinks\n\n- Prefers green tea [^{tea.id}]" and page.sources == [tea.id]
    assert page.title == "Notes rewritten after a forget" and page.tags == []
    assert not (vault.root / ALICE).exists() and not (vault.root / COFFEE).exists() and is_clean(vault.root)
    assert f"]({moved})" in (vault.root / "MEMORY.md").read_text()
    assert ALICE not in (vault.root / "index.md").read_text()
    assert git(vault.root, "log", "-1", "--format=%s").strip().startswith("dream: scrub — 1 page rewritten")


def test_scrub_and_pending_days_in_one_run_a_rejected_scrub_does_not_hold_up_the_days(vault, fake):
    tea, coffee = consolidated_pages(vault, fake)
    vault.forget(coffee.id)
    milk = vault.add("Alice takes oat milk", at="2026-11-05T09:00:00")
    day_batch = answer(pages=[{"action": "create", "path": "wiki/people/milk.md", "title": "Milk",
                               "body": f"Oat milk [^{milk.id}]."}],
                       facts=[consolidated(milk.id, "wiki/people/milk.md")])
    fake.script = [answer(pages=[])] * 3 + [day_batch]
    before = commit_count(vault.root)
    first = dream(vault, fake)
    assert not first.ok and "still cites" in first.error
    assert [(b.label, b.outcome) for b in first.batches] == [("scrub", "failed"), ("2026-11-05..2026-11-05", "ok")]
    assert vault.watermark.isoformat() == "2026-11-05" and commit_count(vault.root) == before + 2

    # both due on the next night: scrub first, then the day batch; one commit each
    bread = vault.add("Alice bakes rye bread", at="2026-11-07T09:00:00")
    fake.script = [rewrite_alice(tea.id),
                   answer(pages=[{"action": "update", "path": "wiki/people/milk.md",
                                  "body": f"Oat milk [^{milk.id}]; rye bread [^{bread.id}]."}],
                          facts=[consolidated(bread.id, "wiki/people/milk.md")])]
    before = commit_count(vault.root)
    second = dream(vault, fake)
    assert second.ok and second.caught_up and [b.label for b in second.batches] == ["scrub", "2026-11-07..2026-11-07"]
    subjects = git(vault.root, "log", "-2", "--format=%s").splitlines()
    assert subjects[1] == "dream: scrub — 1 page rewritten without forgotten facts, 1 removed"
    assert subjects[0].startswith("dream: 2026-11-07..2026-11-07")
    assert commit_count(vault.root) == before + 2 and is_clean(vault.root)
    assert coffee.id not in "".join(p.read_text() for p in (vault.root / "wiki").rglob("*.md"))
    assert f"- Alice — [Alice]({ALICE})" in (vault.root / "MEMORY.md").read_text()


def test_scrub_and_day_batch_attempts_are_counted_apart():
    from memvault.formats.dreamlog import failed_attempts, parse_journal

    log = "\n".join([
        "- 2026-11-20T03:00:00+00:00 dream failed 2026-11-01..2026-11-05 · attempt 1/3: bad",
        "- 2026-11-20T03:00:01+00:00 dream failed scrub · attempt 1/3: bad",
        "- 2026-11-21T03:00:00+00:00 dream ok 2026-11-06..2026-11-07 watermark=2026-11-07 · fine",
        "- 2026-11-21T03:00:01+00:00 dream failed 2026-11-01..2026-11-05 · attempt 2/3: bad",
        "- 2026-11-22T03:00:00+00:00 dream ok scrub · 1 page(s) rewritten",
    ])
    entries = parse_journal(log)
    # the day batch's ok resets day batches only; the scrub's ok resets the scrub only
    assert failed_attempts(entries, "2026-11-01..2026-11-05") == 1
    assert failed_attempts(entries, "scrub") == 0
    assert failed_attempts(entries[:4], "scrub") == 1


def test_scrub_pages_that_do_not_fit_one_request_wait_for_the_next_and_one_too_big_is_stripped(vault, fake):
    """Fault: a 4,096-token window and three pages citing a forgotten fact: two that fit a request
    one at a time, and one too big for any request."""
    keep = vault.add("Kim plays the cello", at="2026-11-01T09:00:00")
    gone = vault.add("Kim lives at 5 Elm Street", at="2026-11-01T10:00:00")
    paths = {}
    for name, lines in (("a", 40), ("b", 40), ("c", 220)):
        path = paths[name] = f"wiki/people/kim-{name}.md"
        body = "\n".join(f"- Kim played cello piece number {i} [^{keep.id}]" for i in range(lines))
        (vault.root / path).write_text(f"---\ntitle: Kim {name}\n---\n{body}\n- Lives on Elm [^{gone.id}]\n")
    vault.git.commit(list(paths.values()), "edit: Kim's pages by hand")
    vault.forget(gone.id)

    def rewrite(body: dict) -> str:
        data = request_data(body)
        assert "Elm" not in json.dumps(body) and gone.id not in json.dumps(body)  # the model never sees it
        return answer(pages=[{"action": "update", "path": p["path"], "section": None,
                              "title": "Kim", "body": p["body"]} for p in data["pages"]])

    fake.default = rewrite
    report = dream(vault, fake, llm={"context_window": 4096})

    assert report.ok and [b.label for b in report.batches][:3] == ["scrub", "scrub", "scrub"]
    sent = [[p["path"] for p in request_data(r)["pages"]] for r in fake.requests]
    assert sent == [["wiki/people/page-1.md"]] * 2  # one page per request: two did not fit together
    scrubs = [line for line in log_lines(vault) if " dream ok scrub " in line]
    assert len(scrubs) == 3 and "the runner removed the citing lines of 1 page(s) too big" in scrubs[-1]
    assert not any((vault.root / path).exists() for path in paths.values())  # each under its new title's slug
    paths = {"a": "wiki/people/kim.md", "b": "wiki/people/kim-2.md",
             "c": "wiki/people/notes-rewritten-after-a-forget.md"}  # c: the runner's neutral title and slug
    for path in paths.values():
        text = (vault.root / path).read_text()
        assert gone.id not in text and "Elm" not in text and keep.id in text
    assert vault.dream_status()["scrub_pages"] == [] and is_clean(vault.root)

"""Credentials refused at write, and kept out of every prompt when stored on purpose.

Bad inputs tried: an AWS access key, a GitHub token, a private-key block, an unquoted password
assignment, an environment-style DB_PASSWORD= and user:password@ in a postgres and an https URL
(the last three once passed the pre-filter unscanned), through the CLI (one fact, and line 3 of a
--stdin batch), the Python API and the MCP tool's library path; the same in a fact's source, tag or
session and in a forget reason (refused even with --allow-secret); benign texts full of "key",
"token" and "password" words, a URL with a port and an e-mail address. Faults looked for:
the credential in the log, the commit subject, a dream request, a context bundle; and, for a
credential that reached the vault without `add` (a log line unmarked by hand, a page edited by hand,
both committed with plain git), in a dream request, a scrub request, a context bundle, a page
rewritten by a model that updated it blindly, and doctor's silence.
"""

from __future__ import annotations

import json

import pytest
from support.dream import FakeLLM, answer, consolidated, dream, request_data, use_mode
from support.fake_llm import consolidate_everything
from support.git import commit_count, git, is_clean

from memvault.errors import ExitCode, InvalidInput, InvalidItem

AWS = "the deploy key is AKIAIOSFODNN7EXAMPLE"
GITHUB = "CI uses ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
PRIVATE = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7d2\n-----END RSA PRIVATE KEY-----"
PASSWORD = "staging db\npassword: correcthorsebatterystaple"
ENV_PASSWORD = "DB_PASSWORD=hunter2"
POSTGRES = "postgres://admin:S3cr3tP4ss@db.example.com:5432/prod"
GIT_URL = "clone https://bob:hunter2x@example.com/repo.git"


@pytest.mark.parametrize("text, kind", [(AWS, "AWS Access Key"), (GITHUB, "GitHub Token"),
                                        (PRIVATE, "Private Key"), (PASSWORD, "Secret Keyword"),
                                        (ENV_PASSWORD, "Secret Keyword"), (POSTGRES, "Basic Auth Credentials"),
                                        (GIT_URL, "Basic Auth Credentials")])
def test_add_refuses_a_credential_in_one_line_and_writes_nothing(cli, vault_dir, text, kind):
    before = commit_count(vault_dir)
    result = cli("add", text)
    assert result.exit_code == ExitCode.USAGE and result.stdout == ""
    assert result.stderr.count("\n") == 1 and kind in result.stderr and "--allow-secret" in result.stderr
    assert commit_count(vault_dir) == before
    assert list((vault_dir / "logs").rglob("*.md")) == [] and is_clean(vault_dir)


@pytest.mark.parametrize("option, value, kind", [
    ("--source", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "GitHub Token"),
    ("--tag", "AKIAIOSFODNN7EXAMPLE", "AWS Access Key"),
    ("--session", "password=hunter2xyz", "Secret Keyword"),
])
def test_a_credential_in_a_label_is_refused_even_with_allow_secret(cli, vault_dir, vault, option, value, kind):
    """Labels are committed, shown and sent to dream's model even for a secret fact; everyday
    labels (a UUID session, an agent name with a version) are not credentials."""
    before = commit_count(vault_dir)
    for extra in ((), ("--allow-secret",)):
        result = cli("add", "deploy happened", option, value, *extra)
        assert result.exit_code == ExitCode.USAGE and result.stdout == "", result.stderr
        assert result.stderr.count("\n") == 1 and kind in result.stderr and option[2:] in result.stderr
    assert commit_count(vault_dir) == before and value not in git(vault_dir, "log", "-p")
    fine = vault.add("deploy happened", source="my-agent/v2.3.1", session="123e4567-e89b-12d3-a456-426614174000",
                     tags=["ops", "api-docs"])
    with pytest.raises(InvalidInput, match="reason holds a credential"):
        vault.forget(fine.id, reason=f"leaked {value}")
    assert not vault.tombstones() and value not in git(vault_dir, "log", "-p")


def test_a_credential_on_any_line_of_a_batch_refuses_the_whole_batch(cli, vault_dir, vault):
    lines = ["Alice prefers green tea", json.dumps({"text": "Bob runs the builds"}), json.dumps({"text": GITHUB})]
    result = cli("add", "--stdin", input="\n".join(lines) + "\n")
    assert result.exit_code == ExitCode.USAGE and result.stderr.startswith("memvault: line 3: ")
    assert "GitHub Token (line 1)" in result.stderr and vault.recent() == []
    with pytest.raises(InvalidItem, match="item 2: .*AWS Access Key"):
        vault.add_many(["fine", {"text": AWS}])
    with pytest.raises(InvalidInput, match="holds a credential"):
        vault.add(PRIVATE)
    assert vault.recent() == []


def test_everyday_words_about_keys_tokens_and_passwords_are_not_credentials(vault):
    texts = ["Finding that happy medium is key for Jon", "She forgot her password again and reset it",
             "Bob keeps the house keys under the mat", "The token economy in the arcade uses brass tokens",
             "Private lessons on Tuesdays; secret ingredient is cinnamon",
             "Visited https://en.wikipedia.org/wiki/Public-key_cryptography for the seminar",
             "The docs are at https://example.com:8080/docs; mail bob@example.com at 10:30"]
    assert [f.text for f in vault.add_many([{"text": t} for t in texts])] == texts


@pytest.mark.parametrize("text", ["db password is Xk9#mQ2vLp7!", "Zeppelin vault password is hunter2",
                                  "the wifi passcode was 'swordfish'", "Her password is now CorrectHorse"])
def test_a_password_stated_in_words_is_refused(cli, vault_dir, text):
    """Seen: the first two were stored (only `password:` and `password=` were refused), and the
    second went to the model in a dream."""
    before = commit_count(vault_dir)
    result = cli("add", text)
    assert result.exit_code == ExitCode.USAGE and result.stderr.count("\n") == 1
    assert "Stated Password (line 1)" in result.stderr and "--allow-secret" in result.stderr
    assert commit_count(vault_dir) == before and list((vault_dir / "logs").rglob("*.md")) == []


def test_sentences_about_passwords_that_state_none_are_stored(vault):
    texts = ["My password is too short", "the password is the same as before", "The password is on the sticky note",
             "his password was his dog's name", "password is 12 characters long", "Your password is weak",
             "The password was reset on 2024-01-01", "the password is in 1Password", "A safe password is key.",
             "the passcode is written on the box", "Her password was stolen in the 2019 breach"]
    assert [f.text for f in vault.add_many(texts)] == texts


def test_a_password_a_hand_edit_stated_in_a_fact_never_reaches_the_model(vault, vault_dir):
    plain = vault.add("Alice prefers green tea", at="2026-11-01T10:00:00")
    log = vault_dir / plain.path
    log.write_text(log.read_text().replace("Alice prefers green tea", "Zeppelin vault password is hunter2"))
    git(vault_dir, "commit", "-qam", "hand edit")
    with FakeLLM(default=consolidate_everything()) as fake:
        assert dream(vault, fake).ok
    assert "hunter2" not in json.dumps(fake.requests)
    assert plain.id in (vault_dir / "log.md").read_text()  # kept, accounted for


def test_allow_secret_stores_it_marked_and_no_prompt_or_subject_carries_it(cli, vault_dir, vault):
    stored = cli("add", AWS, "--at", "2026-11-01T09:00:00", "--allow-secret", "--json")
    assert stored.exit_code == 0, stored.stderr
    fact = json.loads(stored.stdout)
    assert fact["secret"] is True and fact["text"] == AWS
    assert '"secret":true' in (vault_dir / fact["path"]).read_text()
    subject = git(vault_dir, "log", "-1", "--format=%B")
    assert "AKIA" not in subject and "text withheld" in subject
    plain = vault.add("Alice prefers green tea", at="2026-11-01T10:00:00")

    with FakeLLM(default=consolidate_everything()) as fake:
        report = dream(vault, fake)
    assert report.ok and vault.watermark.isoformat() == "2026-11-01"
    sent = json.dumps(fake.requests)
    assert "AKIA" not in sent and fact["id"] not in sent and "Alice prefers green tea" in sent
    assert fact["id"] in (vault_dir / "log.md").read_text()  # accounted for (kept), so the watermark moved
    found = vault.search("deploy key", lexical_only=True)  # still found by the person who stored it
    assert [(h.id, h.secret) for h in found] == [(fact["id"], True)]
    bundle = vault.context("deploy key", budget=2000)
    assert "AKIA" not in bundle.markdown and plain.text in bundle.markdown


def test_everyday_labels_never_reach_the_scanner_and_credential_shaped_ones_do():
    """The label gate decides what detect-secrets (0.1 s to import, a scan per label) is asked
    about on every add: a UUID session, a dated session name, `api` or `keyboard` tags and a
    versioned agent name are not (they made `add` 1.6 times as slow, a labelled bulk add a quarter
    the speed); a key, a token, a keyword given a value and a URL with a password are."""
    from memvault.base.credentials import _LABEL_WORTH_SCANNING, find_credentials

    everyday = ["123e4567-e89b-12d3-a456-426614174000", "session-2025-11-23-morning", "api", "keyboard",
                "author", "my-agent/v2.3.1", "locomo-conv-26-session-1", "tokenizer"]
    assert [label for label in everyday if _LABEL_WORTH_SCANNING.search(label)] == []
    shaped = ["ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "AKIAIOSFODNN7EXAMPLE", "password=hunter2xyz",
              "DB_PASS: x9!kq", "https://bob:s3cret@example.org/repo.git", "-----BEGIN RSA PRIVATE KEY-----"]
    assert all(_LABEL_WORTH_SCANNING.search(label) for label in shaped)
    found = find_credentials(["api", "AKIAIOSFODNN7EXAMPLE", "api", "AKIAIOSFODNN7EXAMPLE"], labels=True)
    assert sorted(found) == [1, 3]  # a label given twice is scanned once and named at each place


# -- credentials that reached the vault without `add`: a hand edit, a plain git commit, another tool

def _unmarked(vault, vault_dir, text: str, at: str):
    """A fact holding a credential in a log without the `secret` mark, committed by plain git."""
    fact = vault.add(text, at=at, allow_secret=True)
    log = vault_dir / fact.path
    log.write_text(log.read_text().replace(',"secret":true', "").replace('"secret":true,', ""))
    git(vault_dir, "commit", "-qam", "hand edit")
    assert "secret" not in log.read_text()
    return fact


def test_a_credential_a_hand_edit_put_in_a_log_never_reaches_a_prompt(vault, vault_dir):
    fact = _unmarked(vault, vault_dir, AWS, "2026-11-01T09:00:00")
    plain = vault.add("Alice prefers green tea", at="2026-11-01T10:00:00")
    with FakeLLM(default=consolidate_everything()) as fake:
        report = dream(vault, fake)
    assert report.ok and vault.watermark.isoformat() == "2026-11-01"
    sent = json.dumps(fake.requests)
    assert "AKIA" not in sent and fact.id not in sent and plain.text in sent
    assert fact.id in (vault_dir / "log.md").read_text()  # accounted for (kept), so the watermark moved
    assert [h.id for h in vault.search("deploy key", lexical_only=True)] == [fact.id]
    for bundle in (vault.context("deploy key", budget=2000), vault.context(None, budget=2000)):
        assert "AKIA" not in bundle.markdown and fact.id not in bundle.markdown


def test_a_credential_a_hand_edit_put_in_a_fact_label_never_reaches_a_prompt(cli, vault, vault_dir):
    """`add` refuses a credential in a source, session or tag; a hand edit does not ask: a prompt
    shows a fact's source and tags, a bundle its session too."""
    token, key = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "AKIAIOSFODNN7EXAMPLE"
    by_source = vault.add("deploy went fine", at="2026-11-01T09:00:00", source="ci-bot")
    by_tag = vault.add("rotated the staging keys", at="2026-11-01T09:30:00", tags=["ops"])
    by_session = vault.add("staging was slow", at="2026-11-01T09:45:00", session="chat-1")
    plain = vault.add("Alice prefers green tea", at="2026-11-01T10:00:00")
    log = vault_dir / plain.path
    log.write_text(log.read_text().replace('"ci-bot"', f'"{token}"').replace('["ops"]', f'["{key}"]')
                   .replace('"chat-1"', '"password=hunter2xyz"'))
    git(vault_dir, "commit", "-qam", "hand edit of labels")
    with FakeLLM(default=consolidate_everything()) as fake:
        assert dream(vault, fake).ok
    sent = json.dumps(fake.requests)
    assert token not in sent and key not in sent and plain.text in sent
    for fact in (by_source, by_tag, by_session):
        assert fact.id not in sent and fact.id in (vault_dir / "log.md").read_text()  # kept
    bundle = cli("context", "deploy staging keys", "--budget", "4000", "--json").stdout
    assert token not in bundle and key not in bundle and "hunter2" not in bundle and plain.text in bundle
    check = {c["name"]: c for c in json.loads(cli("doctor", "--json").stdout)["checks"]}["credentials"]
    assert check["status"] == "warn" and any("source: GitHub Token" in d for d in check["details"])
    assert any("tag: AWS Access Key" in d for d in check["details"])
    assert any("session: Secret Keyword" in d for d in check["details"])


def test_context_leaves_out_a_page_section_whose_heading_or_tags_hold_a_credential(cli, vault, vault_dir):
    use_mode(vault, "prose")  # the page as the prose contract writes it: "## Entries", tag "journal"
    vault.add("Alice deploys on Fridays", at="2026-11-01T09:00:00")
    with FakeLLM(default=consolidate_everything()) as fake:
        assert dream(vault, fake).ok
    page = vault_dir / "wiki/topics/journal.md"
    page.write_text(page.read_text().replace("## Entries", "## Staging password: correcthorsebatterystaple"))
    git(vault_dir, "commit", "-qam", "hand edit of a heading")
    bundle = cli("context", "Alice deploys staging", "--budget", "4000", "--json")
    assert bundle.exit_code == 0 and "correcthorse" not in bundle.stdout
    page.write_text(page.read_text().replace("## Staging password: correcthorsebatterystaple", "## Entries")
                    .replace("- journal", "- ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"))
    git(vault_dir, "commit", "-qam", "hand edit of a tag")
    bundle = cli("context", "Alice deploys", "--budget", "4000", "--json")
    assert bundle.exit_code == 0 and "ghp_" not in bundle.stdout and "Alice deploys on Fridays" in bundle.stdout


def _page_with_a_credential(vault, vault_dir):
    first = vault.add("Alice deploys on Fridays", at="2026-11-01T09:00:00")
    vault.add("Carol runs the release notes", at="2026-11-01T10:00:00")
    with FakeLLM(default=consolidate_everything()) as fake:
        assert dream(vault, fake).ok
    page = vault_dir / "wiki/topics/journal.md"
    marker = "<!-- fact sources"  # the runner writes what follows it
    page.write_text(page.read_text().replace(marker, "Staging db\npassword: correcthorsebatterystaple\n\n" + marker))
    git(vault_dir, "commit", "-qam", "hand edit of a page")
    return first, page, page.read_bytes()


def test_a_page_holding_a_credential_is_never_shown_and_never_rewritten(vault, vault_dir):
    """The page, its index.md and MEMORY.md lines stay out of the prompt (MEMORY.md whole, so the
    runner keeps its lines); a model that updates the page blindly is told it is not open and puts
    the facts elsewhere, and the page keeps every byte."""
    use_mode(vault, "prose")  # (the notes mode builds MEMORY.md from the pages open to it)
    _first, page, before = _page_with_a_credential(vault, vault_dir)
    second = vault.add("Bob reviews the deploys", at="2026-11-02T09:00:00")
    blind = answer([{"action": "update", "path": "wiki/topics/journal.md", "section": "Entries",
                     "body": f"- Bob reviews the deploys [^{second.id}]"}],
                   [consolidated(second.id, "wiki/topics/journal.md")])
    with FakeLLM([blind], default=consolidate_everything("wiki/topics/reviews.md", "Reviews")) as fake:
        report = dream(vault, fake)
    assert report.ok, report
    sent = json.dumps(fake.requests)
    assert "correcthorse" not in sent and "wiki/topics/journal.md)" not in sent
    assert all("memory_md" not in request_data(r) for r in fake.requests)
    assert "not open to this batch" in fake.requests[1]["messages"][-1]["content"]
    assert page.read_bytes() == before
    assert f"[^{second.id}]" in (vault_dir / "wiki/topics/reviews.md").read_text()
    memory = (vault_dir / "MEMORY.md").read_text()
    assert "(wiki/topics/journal.md)" in memory and "(wiki/topics/reviews.md)" in memory
    bundle = vault.context("staging db password", budget=2000)
    assert "correcthorse" not in bundle.markdown


def test_the_scrub_of_a_page_holding_a_credential_is_done_by_the_runner(vault, vault_dir):
    first, page, _before = _page_with_a_credential(vault, vault_dir)
    vault.forget(first.id, reason="wrong")
    with FakeLLM(default=consolidate_everything()) as fake:
        assert dream(vault, fake).ok
    assert "correcthorse" not in json.dumps(fake.requests)
    # the runner rewrote it (under a neutral title, hence another slug) and kept the rest of it
    [rewritten] = [p.read_text() for p in (vault_dir / "wiki/topics").glob("*.md") if "Carol" in p.read_text()]
    assert first.id not in rewritten and "correcthorse" in rewritten
    [entry] = [line for line in (vault_dir / "log.md").read_text().splitlines() if " scrub " in line]
    assert "1 page(s) holding a credential" in entry and "too big" not in entry and "model openai" not in entry


def test_doctor_names_credentials_add_never_checked(cli, vault, vault_dir):
    marked = vault.add(GITHUB, allow_secret=True)
    checks = {c["name"]: c for c in json.loads(cli("doctor", "--json").stdout)["checks"]}
    assert checks["credentials"]["status"] == "ok" and "1 fact(s) stored with --allow-secret" in \
        checks["credentials"]["message"]
    fact = _unmarked(vault, vault_dir, AWS, "2026-11-01T09:00:00")
    _first, _page, _before = _page_with_a_credential(vault, vault_dir)
    memory = vault_dir / "MEMORY.md"
    memory.write_text(memory.read_text() + "- Staging DB_PASSWORD=hunter2 (wiki/topics/journal.md)\n")
    git(vault_dir, "commit", "-qam", "hand edit of MEMORY.md")
    result = cli("doctor", "--json")
    assert result.exit_code == 0, result.stdout  # a warning: nothing is broken, and prompts leave them out
    check = {c["name"]: c for c in json.loads(result.stdout)["checks"]}["credentials"]
    assert check["status"] == "warn" and "3 fact(s), page(s) or line(s)" in check["message"]
    assert any(d.startswith("MEMORY.md line ") and "Secret Keyword" in d for d in check["details"])
    assert any(fact.id in d and "AWS Access Key" in d for d in check["details"])
    assert any(d.startswith("wiki/topics/journal.md") for d in check["details"])
    assert not any(marked.id in d for d in check["details"]) and "AKIA" not in result.stdout
    assert "hunter2" not in cli("context", "staging", "--budget", "2000").stdout

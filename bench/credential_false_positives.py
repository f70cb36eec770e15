"""Credential detection at `add`: false positives on real conversation text, and what it costs.

Scans every LoCoMo dev text (dialog turns and observations: what people and agents really say)
with memvault.base.credentials.find_credentials and prints the texts it would refuse (target: none),
then the credentials of a sample set it finds (target: all), and the time per text beside the
time to parse the same texts as JSON lines (a floor for any per-text work), in the same run.

LoCoMo hardly speaks of passwords, so passwords stated in words are also tried on everyday
sentences about passwords (target: none refused) and on every LoCoMo sentence of the form
"<word> is/was <rest>" with the word made "password" (what a conversation about passwords would
look like: it prints how many would be refused and a sample, to be read by eye).

Usage: python bench/credential_false_positives.py [--data PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "locomo-dev.json"

# Made-up credentials of the shapes people paste (none of them works anywhere).
CREDENTIALS = [
    "the AWS key is AKIAIOSFODNN7EXAMPLE",
    "ci token ghp_1234567890abcdefghijklmnopqrstuvwxyzAB",
    "slack bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "export OPENAI_API_KEY=sk-proj-abc123DEF456ghi789JKL012mno345PQR678stu901",
    'db password = "hunter2hunter2XyZ9!"',
    "password: correcthorsebatterystaple",
    "DB_PASSWORD=hunter2",
    "postgres://admin:S3cr3tP4ss@db.example.com:5432/prod",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7d2\n-----END RSA PRIVATE KEY-----",
    "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "db password is Xk9#mQ2vLp7!",
    "Zeppelin vault password is hunter2",
    "the wifi passcode was 'swordfish'",
    "My password for the staging db is P@ssw0rd1 and nobody else knows it",
    "Her password is now CorrectHorse",
]
# Everyday sentences about passwords: none states one.
EVERYDAY = [
    "She forgot her password again and reset it", "My password is too short", "Passwords are hard to remember",
    "the password is the same as before", "The password is on the sticky note", "his password was his dog's name",
    "password is 12 characters long", "I changed my password yesterday", "the password is 8 digits",
    "Your password is weak", "The password was reset on 2024-01-01", "the password is in 1Password",
    "My password manager is great", "the password is case-sensitive", "the passcode is written on the box",
    "Her password was stolen in the 2019 breach", "the password is what you set up last week",
    "Joanna said the password is easy to guess", "The passphrase is four random words",
]


def texts_of(data: list[dict]) -> list[str]:
    found = []
    for sample in data:
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                found += [f"{turn['speaker']}: {turn['text']}" for turn in turns]
        for session in sample.get("observation", {}).values():
            for observations in session.values():
                found += [item[0] for item in observations]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    from memvault.base.credentials import find_credentials

    texts = texts_of(json.loads(args.data.read_text()))
    started = time.perf_counter()
    refused = find_credentials(texts)
    scan = time.perf_counter() - started
    lines = [json.dumps({"text": t}) for t in texts]
    started = time.perf_counter()
    for line in lines:
        json.loads(line)
    floor = time.perf_counter() - started
    print(f"LoCoMo dev texts                 {len(texts):8,}")
    print(f"refused as holding a credential  {len(refused):8,}   (false positives; target 0)")
    for index, findings in refused.items():
        print(f"    {', '.join(map(str, findings))}: {texts[index][:100]!r}")
    caught = find_credentials(CREDENTIALS)
    print(f"sample credentials found         {len(caught):5} of {len(CREDENTIALS)}   (target all)")
    for index, text in enumerate(CREDENTIALS):
        if index not in caught:
            print(f"    missed: {text[:80]!r}")
    wrong = [text for text in EVERYDAY if find_credentials([text])]
    print(f"everyday password sentences      {len(wrong):5} of {len(EVERYDAY)} refused   (target 0)")
    for text in wrong:
        print(f"    refused: {text!r}")
    stress(texts)
    print(f"scan time                        {scan / len(texts) * 1e6:8.1f} us per text "
          f"(parsing the texts as JSON lines: {floor / len(texts) * 1e6:.1f} us, x{scan / max(floor, 1e-9):.0f})")


def stress(texts: list[str]) -> None:
    """LoCoMo's "<word> is/was ..." sentences with the word made "password" (read the sample)."""
    import re

    from memvault.base.credentials import stated_passwords

    shaped = sorted({re.sub(r"\b\w+(?= (?:is|was) )", "password", t, count=1) for t in texts
                     if re.search(r"\b\w+ (?:is|was) ", t)})
    flagged = [t for t in shaped if stated_passwords(t)]
    print(f"LoCoMo sentences made about passwords {len(shaped):5,}: {len(flagged)} read as stating one")
    for text in flagged[:12]:
        at = text.index("password")
        print(f"    {text[max(at - 20, 0):at + 60]!r}")


if __name__ == "__main__":
    main()

"""What the tests share: git and process helpers, the CLI runner, the models, the fake LLM
server and the sync and dream helpers. Fixtures live in conftest.py (or are imported from here by
the modules that use them); tests import helpers from here, never from conftest.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

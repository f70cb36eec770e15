"""The embedding models tests run on: the tiny stand-in (support/tiny_model.py) or the real one."""

from __future__ import annotations

import os
from pathlib import Path

from support import ROOT

REAL_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
REQUIRE_REAL_MODEL = "MEMVAULT_TESTS_REQUIRE_REAL_MODEL"  # set by .ci/run: a missing model fails


def _real_model() -> dict[str, str] | None:
    """Where the real embedding model is, found the way memvault finds it: MEMVAULT_EMBED_MODEL_PATH,
    then memvault's model cache (`memvault reindex --download-model`), then this repository's
    CI copy beside the checkout. Returns the environment that points memvault at it."""
    configured = os.environ.get("MEMVAULT_EMBED_MODEL_PATH")
    if configured and (Path(configured) / "model.onnx").is_file():
        return {"MEMVAULT_EMBED_MODEL_PATH": configured}
    from memvault.index.embedder import model_cache_dir
    from memvault.index.probes import cached_model

    cache = model_cache_dir()
    if cached_model(cache, REAL_MODEL_NAME) is not None:
        return {"FASTEMBED_CACHE_PATH": str(cache)}
    shared = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx-int8"
    if (shared / "model.onnx").is_file():
        return {"MEMVAULT_EMBED_MODEL_PATH": str(shared)}
    return None


REAL_MODEL = _real_model()

"""What search must know of each model beyond what fastembed knows: its file, its query
instruction, and where its scores start to mean something (the relevance floor's calibration).

Figures come from bench/retrieval.py and bench/calibrate.py (docs/search.md#models); a model not
listed here gets all-MiniLM-L6-v2's calibration, which docs/search.md says to check with
`--explain` and `--min-score`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
BGE_SMALL = "BAAI/bge-small-en-v1.5"
MS_MARCO_L12 = "Xenova/ms-marco-MiniLM-L-12-v2"


@dataclass(frozen=True)
class EmbeddingModel:
    """A bi-encoder: texts and queries embedded apart, compared by cosine."""

    name: str
    file: str = "model.onnx"   # its ONNX file in a local copy (fastembed's `model_file`)
    query_prefix: str = ""     # put before a query (never a document), as the model was trained
    noise: float = 0.35        # cosine below which it says nothing: off-topic and random queries reach it
    download_mb: int = 90


@dataclass(frozen=True)
class RerankModel:
    """A cross-encoder: reads the query and a text together and gives one logit, higher = more relevant."""

    name: str
    file: str = "onnx/model.onnx"
    # Logit at which a text is as likely relevant as not, and logits per unit of log-odds: the
    # model's logits are over-confident (nonsense pairs reach -11), so they are spread out.
    midpoint: float = 0.0
    scale: float = 1.0
    download_mb: int = 130

    def relevance(self, logit: float) -> float:
        """The logit as a probability that the text answers the query, 0 to 1."""
        x = (logit - self.midpoint) / self.scale
        return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


EMBEDDING_MODELS = {
    model.name: model for model in (
        EmbeddingModel(MINILM),
        EmbeddingModel(BGE_SMALL, file="model_optimized.onnx",
                       query_prefix="Represent this sentence for searching relevant passages: ",
                       noise=0.60, download_mb=70),
    )
}
RERANK_MODELS = {model.name: model for model in (RerankModel(MS_MARCO_L12, scale=3.0),)}


def embedding_model(name: str) -> EmbeddingModel:
    """The profile of an embedding model by its fastembed name (MiniLM's figures for an unknown one)."""
    return EMBEDDING_MODELS.get(name) or EmbeddingModel(name)


def rerank_model(name: str) -> RerankModel:
    return RERANK_MODELS.get(name) or RerankModel(name)


def model_file(directory: str | Path, file: str) -> Path:
    """Where a local copy of a model keeps its ONNX file (fastembed loads that one, by that name)."""
    return Path(directory).expanduser() / file

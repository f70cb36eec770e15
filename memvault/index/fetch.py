"""Fetching the vault's models ahead of use (`memvault reindex --download-model`): the embedding model and
search's rerank model, into the user cache. A hub that cannot be reached is a RemoteError."""

from __future__ import annotations

from memvault.errors import RemoteError
from memvault.storage.store import Storage


def fetch_embedding_model(storage: Storage) -> str:
    """Fetch the vault's embedding model; where it is now."""
    from memvault.index.embedder import ModelUnavailable, download_model
    from memvault.index.search import model_spec

    try:
        return download_model(model_spec(storage))
    except ModelUnavailable as e:
        raise RemoteError(str(e)) from None


def fetch_rerank_model(storage: Storage) -> str:
    """Fetch the vault's rerank model (the cross-encoder); where it is now."""
    from memvault.index.embedder import ModelUnavailable
    from memvault.index.rerank import download_rerank_model
    from memvault.index.search import rerank_spec

    try:
        return download_rerank_model(rerank_spec(storage))
    except ModelUnavailable as e:
        raise RemoteError(str(e)) from None

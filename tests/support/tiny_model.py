"""A tiny stand-in embedding model the tests build themselves, for machines without the real one.

It has the real model's name, files and shapes (fastembed loads it like all-MiniLM-L6-v2: a BERT
tokenizer.json, model.onnx with input_ids/attention_mask/token_type_ids, 384 dimensions) but its
"meaning" is only the bag of its characters and character pairs: fine for testing the index,
the embedding cache, rebuilds and fusion; useless for tests about meaning, which are marked
`real_model` and use the real model (see conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

DIMENSIONS = 384
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _vocab(extra: int = 0) -> dict[str, int]:
    tokens = list(_SPECIAL) + [f"[unused{n}]" for n in range(extra)]
    # Two-letter pieces first so WordPiece prefers them over single letters: words that share
    # letter pairs (tea, team) end up closer than words that share only letters.
    tokens += [a + b for a in _ALPHABET for b in _ALPHABET]
    tokens += ["##" + a + b for a in _ALPHABET for b in _ALPHABET]
    tokens += list(_ALPHABET) + ["##" + c for c in _ALPHABET]
    tokens += list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    return {token: number for number, token in enumerate(tokens)}


def _tokenizer(vocab: dict[str, int]) -> str:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    tokenizer = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return tokenizer.to_str()


def _onnx_model(vocab_size: int, seed: int) -> bytes:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    table = rng.standard_normal((vocab_size, DIMENSIONS)).astype(np.float32)
    table[: len(_SPECIAL)] = 0.0  # [CLS]/[SEP]/[PAD] say nothing about the text
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
              for name in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", DIMENSIONS])
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"], axis=0)],
        "tiny_bag_of_pieces", inputs, [output], initializer=[numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def build(directory: Path, variant: int = 0) -> Path:
    """Write the model files into `directory` (created) and return it. Another `variant` is
    another model: other vectors, and a model.onnx of another size (how memvault tells builds apart)."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = _vocab(extra=variant)
    (directory / "tokenizer.json").write_text(_tokenizer(vocab), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "do_lower_case": True, "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
        "cls_token": "[CLS]", "mask_token": "[MASK]", "model_max_length": 256,
        "tokenizer_class": "BertTokenizer"}), encoding="utf-8")
    (directory / "special_tokens_map.json").write_text(json.dumps({
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
        "mask_token": "[MASK]"}), encoding="utf-8")
    (directory / "config.json").write_text(json.dumps({
        "hidden_size": DIMENSIONS, "max_position_embeddings": 256, "model_type": "bert", "pad_token_id": 0,
        "vocab_size": len(vocab)}), encoding="utf-8")
    (directory / "model.onnx").write_bytes(_onnx_model(len(vocab), seed=7 + variant))
    return directory

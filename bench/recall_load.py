"""Recall under load: Strata's layered recall against one collection holding everything.

Starts a real Redis (``EmbeddedRedis``, temporary directory), a local Ray instance and the
whole app as ``strata serve`` runs it (``serve_app.main.start``: store owner holding
milvus-lite, the session shards, the extractor, the Serve app), with the configured
embedder (``--embedder minilm``, the default, or ``hash``: 384-d character n-grams).

Data, loaded directly into the vector store through the StoreOwner (``RemoteVectorStore``
upserts in batches of up to ``--batch`` rows, one scope per call, then ``flush``), not
through the HTTP API:

* ``--users`` users × ``--per-user`` memories: short English sentences about 5 of 12
  topics per user, ``--fact-share`` facts (with key/value), the rest episodes (with an
  event time); status active, provenance with a session id (10 memories per session),
  ``created_at`` spread over the last 180 days; built as ``MemoryItem`` and turned into
  records with ``strata.layers.records.to_record`` (ids from ``memory_id``);
* ``--chunks`` knowledge chunks (tenant "default", ``Scope.shared("default")``, status
  active, payload ``{doc_id, position, version: 1, title, content_hash, metadata}``):
  3-sentence guide paragraphs (~250 characters) on the same 12 topics, ~10 per document.

The baseline is the design the seeds warn against: ONE milvus-lite collection
("bench_single", created in the StoreOwner process, next to Strata's collections) holding
every memory of every kind plus the knowledge chunks in one vector index, the user being an
ordinary VARCHAR column (not a partition key) filtered at query time. Its schema: pk, user
(scope key), kind (fact / episode / knowledge), text (BM25 analyzer as in
``strata/stores/milvus.py``), dense (384-d, COSINE, AUTOINDEX), sparse (BM25 function,
SPARSE_INVERTED_INDEX), payload (JSON, same payload as Strata's rows). Same rows, same
vectors, inserted in batches with a flush every 2,000 rows (what Strata's ``FlushPolicy``
does on its side), then flushed. It is served over HTTP by a second Serve application
("baseline", ``POST /baseline/recall``) in the same Serve instance: authenticate the same
dev key, embed the query through Strata's own Embedder deployment (same batching), then ONE
call into the StoreOwner (``__ray_call__``) running one hybrid search: a dense search and a
BM25 search, each top 20 with the filter ``user == "<scope>" or kind == "knowledge"``,
fused with RRF (k = 60) in the owner, as ``MilvusVectorStore.search_hybrid`` does; it
returns the top 10 (Strata's default ``top_k``) as items plus a context string of their
texts. It leaves out everything Strata's recall adds: routing, one search per layer (3 or
4 hybrid searches, each a separate owner call, plus a keyword scan of the procedures), the
status filter, fusion scoring (decay, confidence, type priority, layer weights), threshold,
dedup, redaction, the token-budgeted context builder, and the reinforcement write-back and
recall log that follow every Strata recall.

Then, against both, the same queries (drawn from the users' topics: ~50% personal
questions, ~25% how-to questions, ~25% bare keywords, routed by Strata to personal /
knowledge / mixed) over HTTP with async httpx at each concurrency in ``--levels``, with
``--requests`` requests per level. Levels are interleaved (Strata then baseline for each
level); before each phase the shards' pending reinforcements are drained and the owner
flushes. A serial store-level comparison (no HTTP, pre-embedded queries) comes first.

    .venv/bin/python bench/recall_load.py                  # full run, MiniLM (~25 minutes)
    .venv/bin/python bench/recall_load.py --quick          # smoke run (a few minutes)
    .venv/bin/python bench/recall_load.py --embedder hash  # skip the MiniLM embedding time
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx
import ray
from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field
from ray import serve

from actors.directory import ShardDirectory
from actors.store_owner import OWNER_NAME, RemoteVectorStore
from bench.common.http_load import run_http
from bench.common.server import revision, wait_ready
from bench.common.stats import LatencySeries, percentile_ms
from bench.common.topics import (
    FACT_QUERIES,
    HOWTO_QUERIES,
    KEYWORD_QUERIES,
    PLACES,
    TOPICS,
    Topic,
    fill,
)
from serve_app import main as serve_main
from strata.auth import authenticate, scope_for
from strata.layers.knowledge import content_hash
from strata.layers.records import memory_id, to_record
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    Provenance,
    RecordFilter,
    Scope,
    Source,
    StoredRecord,
)
from strata.settings import Settings
from strata.stores.redis_server import EmbeddedRedis, free_port

AUTH = {"Authorization": "Bearer dev"}
TENANT = "default"
SINGLE = "bench_single"
CANDIDATES = 20  # per search, as Strata's recipe (candidates_per_layer)
TOP_K = 10  # Strata's default RecallRequest.top_k
HASH_DIM = 384  # the hash embedder at MiniLM's size, so the store moves the same bytes



@dataclass
class UserPlan:
    scope: Scope
    topics: list[Topic]
    items: list[MemoryItem] = field(default_factory=list)


def plan_users(n_users: int, per_user: int, fact_share: float, seed: int) -> list[UserPlan]:
    rng = random.Random(seed)
    now = datetime.now(timezone.utc)
    users = []
    for u in range(n_users):
        plan = UserPlan(Scope(tenant=TENANT, user=f"user{u:03d}"), rng.sample(TOPICS, 5))
        seen: set[str] = set()
        while len(plan.items) < per_user:
            topic = rng.choice(plan.topics)
            kind = MemoryKind.FACT if rng.random() < fact_share else MemoryKind.EPISODE
            thing = rng.choice(topic.things)
            text = fill(rng.choice(topic.facts if kind is MemoryKind.FACT else topic.episodes),
                         rng, topic, thing)
            session = f"s-{plan.scope.user}-{len(plan.items) // 10:03d}"
            mid = memory_id(plan.scope, session, kind.value, text)
            if mid in seen:
                continue
            seen.add(mid)
            created = now - timedelta(days=rng.uniform(0, 180))
            plan.items.append(MemoryItem(
                id=mid, kind=kind, text=text,
                key=f"{topic.name}.{thing.replace(' ', '_')}" if kind is MemoryKind.FACT else None,
                value=thing if kind is MemoryKind.FACT else None,
                confidence=round(rng.uniform(0.6, 0.95), 2),
                source=Source.INFERRED if rng.random() < 0.2 else Source.USER_STATED,
                provenance=Provenance(session_id=session,
                                      turn_ids=[f"{session}:{rng.randint(1, 30)}"]),
                created_at=created, updated_at=created,
                event_time=(created - timedelta(hours=rng.uniform(0, 48))
                            if kind is MemoryKind.EPISODE else None),
                scope_tags=[topic.name]))
        users.append(plan)
    return users


@dataclass
class Chunk:
    id: str
    doc_id: str
    position: int
    title: str
    text: str


def plan_chunks(n_chunks: int, seed: int) -> list[Chunk]:
    rng = random.Random(seed)
    templates = ("To {action} {thing}, {tip}.",
                 "A common mistake with {thing} is to skip the preparation; {tip}.",
                 "Our members in {place} check their {thing} every {num} days, and the guide "
                 "recommends the same.",
                 "If the {thing} does not work out as expected, {tip} and try again the next "
                 "day.",
                 "When you {action} {thing}, plan for about {num} minutes and {tip}.",
                 "Many readers asked how to {action} {thing} with {extra}; the short answer "
                 "is to {tip}.")
    chunks: list[Chunk] = []
    doc = 0
    seen: set[str] = set()
    while len(chunks) < n_chunks:
        topic = rng.choice(TOPICS)
        thing = rng.choice(topic.things)
        action = rng.choice(topic.actions)
        doc_id = f"guides/{topic.name}/{action.replace(' ', '-')}-{thing.replace(' ', '-')}-{doc}"
        title = f"How to {action} {thing}"
        for position in range(rng.randint(6, 14)):
            sentences = []
            for _ in range(3):
                t = rng.choice(templates)
                s = t.format(action=rng.choice(topic.actions), thing=rng.choice(
                    (thing, thing, rng.choice(topic.things))), tip=rng.choice(topic.tips),
                    place=rng.choice(PLACES), num=rng.choice((2, 5, 7, 10, 14, 20, 30, 45)),
                    extra=rng.choice(topic.extras))
                sentences.append(s[0].upper() + s[1:])
            text = " ".join(sentences)
            digest = content_hash(text)
            if digest in seen:
                continue
            seen.add(digest)
            chunks.append(Chunk(id=f"{doc_id}#{position}@v1-{digest[:8]}", doc_id=doc_id,
                                position=position, title=title, text=text))
            if len(chunks) >= n_chunks:
                break
        doc += 1
    return chunks


def plan_queries(users: Sequence[UserPlan], n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        user = rng.choice(users)
        topic = rng.choice(user.topics)
        r = rng.random()
        kind = "personal" if r < 0.5 else "howto" if r < 0.75 else "keywords"
        pool = {"personal": FACT_QUERIES, "howto": HOWTO_QUERIES,
                "keywords": KEYWORD_QUERIES}[kind]
        query = fill(rng.choice(pool), rng, topic)
        query = query[0].lower() + query[1:] if kind != "keywords" else query
        out.append({"user_id": user.scope.user, "query": query, "_kind": kind})
    return out


# -- code run inside the StoreOwner process (owner.__ray_call__) -------------------------------
def owner_create_single(owner: Any, name: str, dim: int) -> None:
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    from strata.stores.milvus import ANALYZER, MAX_TEXT

    client = owner._store._client
    if client.has_collection(name):
        client.drop_collection(name)
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("pk", DataType.VARCHAR, max_length=1024, is_primary=True)
    schema.add_field("user", DataType.VARCHAR, max_length=512)  # NOT a partition key
    schema.add_field("kind", DataType.VARCHAR, max_length=32)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT, enable_analyzer=True,
                     analyzer_params=ANALYZER)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("payload", DataType.JSON)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                 input_field_names=["text"], output_field_names=["sparse"]))
    index = client.prepare_index_params()
    index.add_index("dense", index_type="AUTOINDEX", metric_type="COSINE")
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_collection(name, schema=schema, index_params=index)


def owner_insert_single(owner: Any, name: str, rows: list[dict[str, Any]], flush: bool) -> None:
    client = owner._store._client
    client.insert(name, rows)
    if flush:
        client.flush(name)


def owner_single_search(owner: Any, name: str, user: str, vector: list[float], text: str,
                        k: int) -> list[dict[str, Any]]:
    """One hybrid search over the single collection: dense + BM25, filtered, RRF-fused."""
    started = time.perf_counter()
    client = owner._store._client
    flt = f"user == {json.dumps(user)} or kind == \"knowledge\""
    out = ["pk", "kind", "text", "payload"]
    dense = client.search(name, data=[vector], anns_field="dense", limit=k, filter=flt,
                          output_fields=out, search_params={"metric_type": "COSINE"})[0]
    lexical = client.search(name, data=[text], anns_field="sparse", limit=k, filter=flt,
                            output_fields=out, search_params={"metric_type": "BM25"})[0]
    fused: dict[str, dict[str, Any]] = {}
    for hits in (dense, lexical):
        for rank, hit in enumerate(hits):
            entity = hit["entity"]
            pk = str(hit.get("pk", hit.get("id")))
            entry = fused.setdefault(pk, {"id": pk.split("|", 1)[-1], "kind": entity["kind"],
                                          "text": entity["text"], "score": 0.0})
            entry["score"] += 1.0 / (60 + rank + 1)
    ranked = sorted(fused.values(), key=lambda e: e["score"], reverse=True)[:k]
    if isinstance(owner._store, CountingStore):
        owner._store.add("single_search", time.perf_counter() - started)
    return ranked


def owner_drain(owner: Any) -> dict[str, dict[str, Any]]:
    """Wait for milvus-lite's background work (compaction, index builds); segment counts."""
    try:
        from milvus_lite import server_manager_instance as mgr
    except Exception as exc:  # internals moved: report, don't fail the run
        return {"error": {"detail": repr(exc)}}
    out: dict[str, dict[str, Any]] = {}
    for _path, (_server, db, _port) in list(mgr._servers.items()):
        for name in db.list_collections():
            try:
                col = db.get_collection(name)
                started = time.perf_counter()
                col._wait_for_bg(timeout=900)
                out[name] = {"rows": int(col.num_entities),
                             "segments": len(col._segments_snapshot()),
                             "memtable": int(col._memtable.size()),
                             "bg_wait_s": round(time.perf_counter() - started, 2)}
            except Exception as exc:  # report, don't fail the run
                out[name] = {"error": repr(exc)}
    return out


class CountingStore:
    """Wraps the owner's MilvusVectorStore: calls and seconds per method (each of the
    owner's typed methods calls its store once, so every remote call is counted once)."""

    def __init__(self, inner: Any) -> None:
        import threading

        self._inner = inner
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - started)

        return counted

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.counts[name] += 1
            self.seconds[name] += seconds


def owner_install_counter(owner: Any) -> int:
    if not isinstance(owner._store, CountingStore):
        owner._store = CountingStore(owner._store)
    return os.getpid()


def owner_take_counts(owner: Any) -> dict[str, dict[str, float]]:
    store = owner._store
    if not isinstance(store, CountingStore):
        return {}
    with store._lock:
        out = {k: {"calls": float(v), "seconds": store.seconds[k]}
               for k, v in store.counts.items()}
        store.counts.clear()
        store.seconds.clear()
    return out


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float, str]]:
    """pid → (ppid, cpu seconds, process title) for every readable process."""
    table: dict[int, tuple[int, float, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                title = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK,
                             title)
    return table


def _group(title: str) -> str:
    if title.startswith("ray::"):
        name = title[5:].split(".")[0].split(" ")[0]
        if name.startswith("ServeReplica:"):
            return name.split(":")[-1]
        if "Extract" in name:
            return "extractor"
        return {"StoreOwnerService": "StoreOwner", "SessionShard": "shards",
                "ProxyActor": "Serve proxy"}.get(name, "ray / serve system")
    head = title.split(" ")[0]
    if "redis-server" in head:
        return "redis"
    return "ray / serve system"


def cpu_snapshot() -> dict[int, tuple[float, str]]:
    """CPU seconds of this process and all its descendants (this run's whole cluster)."""
    table = _proc_table()
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _, _) in table.items():
        children[ppid].append(pid)
    me = os.getpid()
    out: dict[int, tuple[float, str]] = {}
    stack = [me]
    while stack:
        pid = stack.pop()
        if pid in table:
            cpu, title = table[pid][1], table[pid][2]
            out[pid] = (cpu, "load generator (driver)" if pid == me else _group(title))
        stack.extend(children.get(pid, ()))
    return out


def cpu_delta(before: dict[int, tuple[float, str]],
              after: dict[int, tuple[float, str]]) -> dict[str, float]:
    groups: dict[str, float] = defaultdict(float)
    for pid, (cpu, name) in after.items():
        groups[name] += cpu - before.get(pid, (0.0, name))[0]
    return dict(groups)


# -- the baseline's HTTP front: a second Serve application --------------------------------------
baseline_api = FastAPI()


def _concrete_annotations(annotations: dict[str, Any]) -> Any:
    """Replace string annotations by the objects: the replica unpickles this module's
    functions by value, where FastAPI could not resolve the names again."""

    def apply(fn: Any) -> Any:
        fn.__annotations__ = dict(annotations)
        return fn

    return apply


class BaselineBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(default=TOP_K, ge=1, le=100)


@serve.deployment(name="BaselineRecall", ray_actor_options={"num_cpus": 0},
                  max_ongoing_requests=64)
@serve.ingress(baseline_api)
class BaselineRecall:
    """Embed (Strata's Embedder deployment) → one hybrid search in the owner → top k."""

    def __init__(self, namespace: str, collection: str, candidates: int) -> None:
        self._embedder = serve.get_deployment_handle("Embedder", app_name="strata")
        self._owner = ray.get_actor(OWNER_NAME, namespace=namespace)
        self._collection = collection
        self._k = candidates

    @baseline_api.post("/recall")
    @_concrete_annotations({"body": BaselineBody, "request": Request, "return": dict})
    async def recall(self, body: BaselineBody, request: Request) -> dict[str, Any]:
        scope = scope_for(authenticate(request.headers.get("authorization"), {}), body.user_id)
        vector = await self._embedder.embed.remote(body.query)
        hits = await self._owner.__ray_call__.remote(
            owner_single_search, self._collection, scope.key, vector, body.query, self._k)
        items = hits[: body.top_k]
        return {"context": "\n".join(f"- {h['text']}" for h in items), "items": items}


# -- measurement ---------------------------------------------------------------------------------
@dataclass
class Series(LatencySeries):
    """A phase's latencies plus what the responses and the processes told."""

    items: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    routes: Counter[str] = field(default_factory=Counter)
    layer_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    cpu_s: dict[str, float] = field(default_factory=dict)
    owner_calls: dict[str, dict[str, float]] = field(default_factory=dict)

    def record(self, resp: httpx.Response) -> None:
        self.bytes.append(len(resp.content))
        data = resp.json()
        self.items.append(len(data.get("items", [])))
        if "route" in data:
            self.routes[data["route"]] += 1
        for layer, ms in (data.get("timings_ms") or {}).items():
            self.layer_ms[layer].append(float(ms))


def run_level(url: str, system: str, bodies: Sequence[dict[str, Any]], level: int) -> Series:
    series = Series(system, level)
    requests = [(url, {k: v for k, v in body.items() if not k.startswith("_")})
                for body in bodies]
    run_http(requests, level, system, AUTH, on_response=series.record, series=series)
    return series


def settle(handles: Sequence[Any], owner: Any) -> dict[str, dict[str, Any]]:
    """Let queued reinforcement writes finish (shards run one call at a time), flush, drain."""
    time.sleep(1.0)
    for _ in range(2):
        ray.get([h.pid.remote() for h in handles], timeout=900)
    ray.get(owner.flush.remote(None), timeout=900)
    return ray.get(owner.__ray_call__.remote(owner_drain), timeout=1800)


def wait_baseline(base: str, user: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            resp = httpx.post(f"{base}/baseline/recall", json={"user_id": user,
                                                               "query": "ping"},
                              headers=AUTH, timeout=60)
            if resp.status_code == 200:
                return
            last = f"{resp.status_code} {resp.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1.0)
    raise RuntimeError(f"the baseline app never answered: {last}")


def store_level(owner: Any, queries: Sequence[dict[str, Any]], vectors: np.ndarray,
                n: int) -> dict[str, list[float]]:
    """Serial, no HTTP, pre-embedded queries: one Strata layer search vs one baseline search."""
    flt = RecordFilter(statuses=["active"])
    out: dict[str, list[float]] = defaultdict(list)
    for i, (q, vec) in enumerate(zip(queries[:n], vectors[:n], strict=True)):
        scope = Scope(tenant=TENANT, user=q["user_id"])
        v = [float(x) for x in vec]
        text = q["query"]
        cases: list[tuple[str, Any, tuple[Any, ...]]] = [
            ("strata facts layer (owner.call search_hybrid)", owner.call,
             ("search_hybrid", Collection.FACTS, scope, v, text, CANDIDATES, flt)),
            ("strata episodes layer", owner.call,
             ("search_hybrid", Collection.EPISODES, scope, v, text, CANDIDATES, flt)),
            ("strata knowledge layer", owner.call,
             ("search_hybrid", Collection.KNOWLEDGE, Scope.shared(TENANT), v, text,
              CANDIDATES, flt)),
            ("strata procedures keyword scan (owner.call query, 100)", owner.call,
             ("query", Collection.PROCEDURES, scope, flt, 100)),
            ("baseline single collection (one hybrid search)", owner.__ray_call__,
             (owner_single_search, SINGLE, scope.key, v, text, CANDIDATES)),
        ]
        order = cases if i % 2 == 0 else list(reversed(cases))
        for name, method, call_args in order:
            started = time.perf_counter()
            ray.get(method.remote(*call_args))
            out[name].append(time.perf_counter() - started)
    return out


# -- main ----------------------------------------------------------------------------------------
def embed_all(embedder: Any, texts: Sequence[str], label: str, batch: int = 512) -> np.ndarray:
    started = time.perf_counter()
    parts = []
    for i in range(0, len(texts), batch):
        parts.append(np.asarray(embedder.encode(list(texts[i:i + batch])), dtype=np.float32))
        done = min(i + batch, len(texts))
        if done % (batch * 20) == 0 or done == len(texts):
            el = time.perf_counter() - started
            print(f"    embedded {done:,}/{len(texts):,} {label} ({done / el:,.0f}/s)",
                  flush=True)
    return np.concatenate(parts) if parts else np.zeros((0, embedder.dim), np.float32)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--per-user", type=int, default=500)
    p.add_argument("--fact-share", type=float, default=0.6)
    p.add_argument("--chunks", type=int, default=5000)
    p.add_argument("--levels", default="1,8,32")
    p.add_argument("--requests", default="200,400,800",
                   help="requests per level (one number per level)")
    p.add_argument("--store-queries", type=int, default=200,
                   help="queries of the serial store-level comparison")
    p.add_argument("--batch", type=int, default=500, help="rows per upsert/insert call")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 10 users x 100 memories, 500 chunks, 30/60/120 requests")
    p.add_argument("--json", metavar="PATH", help="also write the raw summary as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.users, args.per_user, args.chunks = 10, 100, 500
        args.requests, args.store_queries = "30,60,120", 40
    levels = [int(x) for x in args.levels.split(",")]
    counts = [int(x) for x in args.requests.split(",")]
    if len(counts) != len(levels):
        p.error("--requests needs one number per level")
    logging.basicConfig(level=logging.WARNING)

    t_all = time.perf_counter()
    print(f"ray {ray.__version__}, httpx {httpx.__version__}, python "
          f"{platform.python_version()}, {os.cpu_count()} cpus, load avg "
          f"{os.getloadavg()[0]:.2f}; strata {revision()}; "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)

    # 1. the data and its vectors (embedded here, before the app starts)
    t0 = time.perf_counter()
    users = plan_users(args.users, args.per_user, args.fact_share, args.seed)
    chunks = plan_chunks(args.chunks, args.seed + 1)
    n_levels_total = sum(counts)
    queries = plan_queries(users, n_levels_total + args.store_queries + 40, args.seed + 2)
    warm, store_qs, load_qs = queries[:40], queries[40:40 + args.store_queries], \
        queries[40 + args.store_queries:]
    memories = [(u, m) for u in users for m in u.items]
    kinds = Counter(m.kind.value for _, m in memories)
    mem_chars = np.mean([len(m.text) for _, m in memories])
    kb_chars = np.mean([len(c.text) for c in chunks])
    print(f"data: {len(users)} users x {args.per_user} memories ({dict(kinds)}, "
          f"{mem_chars:.0f} chars mean), {len(chunks):,} knowledge chunks ({kb_chars:.0f} "
          f"chars mean) in {len({c.doc_id for c in chunks}):,} documents; query mix "
          f"{dict(Counter(q['_kind'] for q in load_qs))} [{time.perf_counter() - t0:.1f} s]",
          flush=True)

    from strata.stores.embedders import make_embedder

    emb_settings = Settings(embedder=args.embedder, hash_dim=HASH_DIM)
    t0 = time.perf_counter()
    embedder = make_embedder(emb_settings)
    model_id, dim = embedder.model_id, embedder.dim
    load_model_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mem_vecs = embed_all(embedder, [m.text for _, m in memories], "memories")
    kb_vecs = embed_all(embedder, [c.text for c in chunks], "chunks")
    store_vecs = embed_all(embedder, [q["query"] for q in store_qs], "queries")
    embed_s = time.perf_counter() - t0
    n_texts = len(memories) + len(chunks) + len(store_qs)
    print(f"  embedder {model_id} ({dim}-d): model load {load_model_s:.1f} s, "
          f"{n_texts:,} texts in {embed_s:.0f} s ({n_texts / embed_s:,.0f} texts/s)",
          flush=True)
    del embedder
    gc.collect()

    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-recall-"))
    redis_server = EmbeddedRedis(tmp / "redis").start()
    settings = Settings(data_dir=tmp, embedder=args.embedder, hash_dim=HASH_DIM,
                        http_port=free_port(), redis_url=redis_server.url,
                        demo_knowledge=False)
    base = f"http://127.0.0.1:{settings.http_port}"
    ray_started = False
    results: list[Series] = []
    try:
        # 2. the whole app, as `strata serve` runs it
        t0 = time.perf_counter()
        ray.init(address="local", num_cpus=os.cpu_count(), namespace=serve_main.NAMESPACE,
                 object_store_memory=512 * 1024 * 1024, include_dashboard=False,
                 log_to_driver=False)
        ray_started = True
        serve_main.start(settings)
        wait_ready(base)
        owner = ray.get_actor(OWNER_NAME, namespace=serve_main.NAMESPACE)
        handles = ShardDirectory.start(settings.model_dump(mode="json"), settings.session_shards,
                                 serve_main.NAMESPACE).handles
        print(f"  app ready [{time.perf_counter() - t0:.0f} s]; flush policy "
              f"{settings.flush_unflushed_rows} rows or {settings.flush_interval_s:g} s",
              flush=True)

        # 3. load Strata's collections through the StoreOwner
        t0 = time.perf_counter()
        store = RemoteVectorStore(owner)
        by_scope: dict[tuple[Scope, Collection], list[StoredRecord]] = defaultdict(list)
        for (user, item), vec in zip(memories, mem_vecs, strict=True):
            coll = Collection.FACTS if item.kind is MemoryKind.FACT else Collection.EPISODES
            by_scope[(user.scope, coll)].append(to_record(item, vec.tolist(), model_id))
        shared = Scope.shared(TENANT)
        now_ts = time.time()
        for chunk, vec in zip(chunks, kb_vecs, strict=True):
            by_scope[(shared, Collection.KNOWLEDGE)].append(StoredRecord(
                id=chunk.id, text=chunk.text, vector=vec.tolist(), status="active",
                created_at=now_ts, updated_at=now_ts, confidence=1.0, embed_model=model_id,
                payload={"doc_id": chunk.doc_id, "position": chunk.position, "version": 1,
                         "title": chunk.title, "content_hash": content_hash(chunk.text),
                         "metadata": {}}))
        calls = 0
        for (scope, coll), records in by_scope.items():
            for i in range(0, len(records), args.batch):
                store.upsert(coll, scope, records[i:i + args.batch])
                calls += 1
        store.flush()
        strata_load_s = time.perf_counter() - t0
        layout = ray.get(owner.__ray_call__.remote(owner_drain), timeout=1800)
        strata_total_s = time.perf_counter() - t0
        print(f"  strata load: {len(memories) + len(chunks):,} rows in {calls} upserts + flush "
              f"{strata_load_s:.0f} s (+{strata_total_s - strata_load_s:.0f} s background "
              f"index/compaction); {_layout(layout)}", flush=True)

        # 4. the baseline collection, same rows, in the owner
        t0 = time.perf_counter()
        ray.get(owner.__ray_call__.remote(owner_create_single, SINGLE, dim))
        rows: list[dict[str, Any]] = []
        for (user, item), vec in zip(memories, mem_vecs, strict=True):
            record = to_record(item, [], model_id)
            rows.append({"pk": f"{user.scope.key}|{item.id}", "user": user.scope.key,
                         "kind": item.kind.value, "text": item.text, "dense": vec.tolist(),
                         "payload": record.payload})
        for record in by_scope[(shared, Collection.KNOWLEDGE)]:
            rows.append({"pk": f"{shared.key}|{record.id}", "user": shared.key,
                         "kind": "knowledge", "text": record.text, "dense": record.vector,
                         "payload": record.payload})
        random.Random(args.seed + 3).shuffle(rows)  # memories arrive interleaved over time
        since_flush = 0
        for i in range(0, len(rows), args.batch):
            batch = rows[i:i + args.batch]
            since_flush += len(batch)
            flush = since_flush >= 2000 or i + args.batch >= len(rows)
            ray.get(owner.__ray_call__.remote(owner_insert_single, SINGLE, batch, flush))
            if flush:
                since_flush = 0
        single_load_s = time.perf_counter() - t0
        layout = ray.get(owner.__ray_call__.remote(owner_drain), timeout=1800)
        print(f"  baseline load: {len(rows):,} rows into {SINGLE} in {single_load_s:.0f} s "
              f"(+{time.perf_counter() - t0 - single_load_s:.0f} s background); "
              f"{_layout(layout)}", flush=True)
        del rows, by_scope, mem_vecs, kb_vecs
        gc.collect()

        # 5. the baseline's HTTP front
        serve.run(BaselineRecall.bind(serve_main.NAMESPACE, SINGLE, CANDIDATES),
                  name="baseline", route_prefix="/baseline")
        wait_baseline(base, users[0].scope.user)

        # 6. store level: serial, no HTTP
        t0 = time.perf_counter()
        raw = store_level(owner, store_qs, store_vecs, args.store_queries)
        print(f"\nStore level, serial, {args.store_queries} pre-embedded queries "
              f"(one Ray call each) [{time.perf_counter() - t0:.0f} s]\n")
        print("| call | p50 ms | p95 ms | p99 ms |")
        print("|---|---:|---:|---:|")
        for name, lat in raw.items():
            print(f"| {name} | {percentile_ms(lat, 50):.1f} | {percentile_ms(lat, 95):.1f} | "
                  f"{percentile_ms(lat, 99):.1f} |")
        print(flush=True)

        # 7. warm-up, then the levels, interleaved
        strata_url, single_url = f"{base}/v1/recall", f"{base}/baseline/recall"
        run_level(strata_url, "strata", warm, 4)
        run_level(single_url, "baseline", warm, 4)
        ray.get(owner.__ray_call__.remote(owner_install_counter))
        offset = 0
        for level, n in zip(levels, counts, strict=True):
            bodies = load_qs[offset:offset + n]
            offset += n
            for system, url in (("strata", strata_url), ("baseline", single_url)):
                settle(handles, owner)
                ray.get(owner.__ray_call__.remote(owner_take_counts))
                la = os.getloadavg()[0]
                cpu0 = cpu_snapshot()
                s = run_level(url, system, bodies, level)
                settle(handles, owner)  # the write-backs this phase queued are its cost
                s.cpu_s = cpu_delta(cpu0, cpu_snapshot())
                s.owner_calls = ray.get(owner.__ray_call__.remote(owner_take_counts))
                results.append(s)
                extra = ""
                if s.routes:
                    extra = f", routes {dict(s.routes)}, layer ms " + ", ".join(
                        f"{k} {np.mean(v):.0f}" for k, v in sorted(s.layer_ms.items()))
                print(f"  {system:8s} c={level:<3d} n={len(s.latencies):4d} err={s.errors} "
                      f"p50 {s.ms(50):7.1f} p95 {s.ms(95):7.1f} p99 {s.ms(99):7.1f} ms "
                      f"{s.per_s:6.1f} req/s; items {np.mean(s.items or [0]):.1f}, "
                      f"{np.mean(s.bytes or [0]) / 1024:.1f} KiB; load avg before {la:.1f}"
                      f"{extra}", flush=True)
                for sample in s.error_samples[:3]:
                    print(f"      error: {sample}")
        final = settle(handles, owner)
        flush_stats = ray.get(owner.stats.remote())

        # 8. report
        print(f"\nRecall over HTTP, {args.users} users x {args.per_user} memories + "
              f"{len(chunks):,} chunks, embedder {model_id}; layout after the run: "
              f"{_layout(final)}; owner flushes {flush_stats.get('flushes', 0):.0f}\n")
        print("| level | system | requests | p50 ms | p95 ms | p99 ms | req/s | items | "
              "errors |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        by = {(s.system, s.level): s for s in results}
        for level in levels:
            for system in ("strata", "baseline"):
                s = by[(system, level)]
                print(f"| {level} | {system} | {len(s.latencies)} | {s.ms(50):.1f} | "
                      f"{s.ms(95):.1f} | {s.ms(99):.1f} | {s.per_s:.1f} | "
                      f"{np.mean(s.items or [0]):.1f} | {s.errors} |")
        print("\n| level | p50 ratio | p95 ratio | p99 ratio | req/s ratio |")
        print("|---:|---:|---:|---:|---:|")
        for level in levels:
            a, b = by[("strata", level)], by[("baseline", level)]
            print(f"| {level} | {a.ms(50) / b.ms(50):.2f}x | {a.ms(95) / b.ms(95):.2f}x | "
                  f"{a.ms(99) / b.ms(99):.2f}x | {a.per_s / b.per_s:.2f}x |")
        print("(ratios are Strata / baseline: above 1 means Strata is slower for latency, "
              "faster for req/s)")
        print("\nCPU milliseconds per request by process group (all processes of this run; "
              "measured over each phase plus the drain of its queued write-backs):\n")
        names = sorted({k for s in results for k in s.cpu_s},
                       key=lambda k: -sum(s.cpu_s.get(k, 0.0) for s in results))
        print("| level | system | " + " | ".join(names) + " | total | wall ms/req |")
        print("|---:|---|" + "---:|" * (len(names) + 2))
        for level in levels:
            for system in ("strata", "baseline"):
                s = by[(system, level)]
                n_ok = max(1, len(s.latencies))
                cells = " | ".join(f"{1000 * s.cpu_s.get(k, 0.0) / n_ok:.1f}" for k in names)
                print(f"| {level} | {system} | {cells} | "
                      f"{1000 * sum(s.cpu_s.values()) / n_ok:.1f} | "
                      f"{1000 * s.wall_s / n_ok:.1f} |")
        print("\nStoreOwner calls per request (calls / owner-side ms, summed over threads):\n")
        for level in levels:
            for system in ("strata", "baseline"):
                s = by[(system, level)]
                n_ok = max(1, len(s.latencies))
                parts = ", ".join(f"{k} {v['calls'] / n_ok:.2f} / {1000 * v['seconds'] / n_ok:.1f}"
                                  for k, v in sorted(s.owner_calls.items(),
                                                     key=lambda kv: -kv[1]["seconds"]))
                print(f"- c={level} {system}: {parts}")
        print(f"\nload avg at end {os.getloadavg()[0]:.2f}; total "
              f"{time.perf_counter() - t_all:.0f} s", flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({"embedder": model_id, "users": args.users,
                           "per_user": args.per_user, "chunks": len(chunks),
                           "store_level": {k: {f"p{q}": percentile_ms(v, q) for q in (50, 95, 99)}
                                           for k, v in raw.items()},
                           "layout": final, "flush_stats": flush_stats,
                           "series": [{"system": s.system, "level": s.level,
                                       "n": len(s.latencies), "errors": s.errors,
                                       "p50": s.ms(50), "p95": s.ms(95), "p99": s.ms(99),
                                       "per_s": s.per_s, "items": float(np.mean(s.items or [0])),
                                       "routes": dict(s.routes), "cpu_s": s.cpu_s,
                                       "owner_calls": s.owner_calls,
                                       "layer_ms": {k: float(np.mean(v))
                                                    for k, v in s.layer_ms.items()}}
                                      for s in results]}, fh, indent=2)
        return 0
    finally:
        _teardown(settings, ray_started)
        redis_server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _layout(layout: dict[str, dict[str, Any]]) -> str:
    parts = []
    for name, info in sorted(layout.items()):
        if info.get("rows"):
            parts.append(f"{name} {info['rows']:,} rows/{info['segments']} seg")
        elif "error" in info:
            parts.append(f"{name}: {info['error']}")
    return ", ".join(parts)


def _teardown(settings: Settings, ray_started: bool) -> None:
    """Serve down (both apps), extractors and shards killed, owner shut down, Ray down."""
    if not ray_started or not ray.is_initialized():
        return
    try:
        with contextlib.suppress(Exception):
            serve_main.stop(settings, shutdown_ray=False)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())

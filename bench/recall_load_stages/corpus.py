"""The recall load benchmark's data (``bench/recall_load.py``): users with memories, knowledge
chunks and queries, all drawn from ``bench.common.topics``, and their vectors.

* users × memories: short English sentences about 5 of 12 topics per user, a share of facts
  (with key/value), the rest episodes (with an event time); status active, provenance with
  a session id (10 memories per session), ``created_at`` spread over the last 180 days;
  built as ``MemoryItem`` and turned into records with ``strata.layers.records.to_record``
  (ids from ``memory_id``);
* knowledge chunks (tenant "default", ``Scope.shared("default")``, status active, payload
  ``{doc_id, position, version: 1, title, content_hash, metadata}``): 3-sentence guide
  paragraphs (~250 characters) on the same 12 topics, ~10 per document;
* queries: ~50% personal questions, ~25% how-to questions, ~25% bare keywords.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from bench.common.topics import (
    FACT_QUERIES,
    HOWTO_QUERIES,
    KEYWORD_QUERIES,
    PLACES,
    TOPICS,
    Topic,
    fill,
)
from bench.recall_load_stages import TENANT
from strata.layers.knowledge import content_hash
from strata.layers.records import memory_id, to_record
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    Provenance,
    Scope,
    Source,
    StoredRecord,
)

__all__ = ["Chunk", "UserPlan", "embed_all", "plan_chunks", "plan_queries", "plan_users",
           "strata_records"]


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


def embed_all(embedder: Any, texts: Sequence[str], label: str, batch: int = 512) -> np.ndarray:
    """``texts`` embedded in batches, progress printed; float32 rows."""
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



def strata_records(memories: Sequence[tuple[UserPlan, MemoryItem]], mem_vecs: np.ndarray,
                   chunks: Sequence[Chunk], kb_vecs: np.ndarray, model_id: str,
                   ) -> dict[tuple[Scope, Collection], list[StoredRecord]]:
    """The rows of Strata's collections, per scope and collection, as its layers write them."""
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
    return by_scope

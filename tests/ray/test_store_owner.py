"""The StoreOwner actor holds the milvus-lite client; a killed owner loses no acknowledged rows."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import ray

from actors.store_owner import OWNER_NAME, RemoteVectorStore, start_store_owner
from strata.models import Collection, Scope, StoredRecord
from strata.settings import Settings
from strata.stores.embedders import HashEmbedder

EMB = HashEmbedder(64)
ALICE = Scope(tenant="t", user="alice")


def record(rid: str, text: str) -> StoredRecord:
    return StoredRecord(id=rid, text=text, vector=EMB.encode([text])[0].tolist())


@pytest.mark.usefixtures("ray_session")
def test_owner_serves_the_port_and_survives_a_kill(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedder="hash", hash_dim=64)
    owner = start_store_owner(settings, EMB.dim, namespace="owner-test")
    store = RemoteVectorStore(owner)
    try:
        store.insert(Collection.FACTS, ALICE, [record("1", "I am allergic to peanuts"),
                                               record("2", "I live in Shanghai")])
        hits = store.search_lexical(Collection.FACTS, ALICE, "peanuts", 5)
        assert [h.record.id for h in hits] == ["1"]

        pid = ray.get(owner.pid.remote())
        os.kill(pid, signal.SIGKILL)  # a crash, not a graceful stop
        deadline = time.monotonic() + 60
        while True:
            try:
                store.ping()
                break
            except ray.exceptions.RayActorError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert {r.id for r in store.query(Collection.FACTS, ALICE)} == {"1", "2"}
        hits = store.search_dense(Collection.FACTS, ALICE,
                                  EMB.encode(["I live in Shanghai"])[0].tolist(), 1)
        assert hits[0].record.id == "2"
    finally:
        ray.kill(ray.get_actor(OWNER_NAME, namespace="owner-test"), no_restart=True)

"""The StoreOwner's typed surface: every ``VectorStore`` method is an actor method of the same
shape, and ``RemoteVectorStore`` has it too (no dispatch by method name)."""

from __future__ import annotations

import inspect
from pathlib import Path

from actors.store_owner import RemoteVectorStore, StoreOwnerService
from strata.models import Collection, Scope, StoredRecord
from strata.settings import Settings
from strata.stores.embedders import HashEmbedder
from strata.stores.ports import DecayFields, Purging, StatusWriter, VectorStore

PORTS = (VectorStore, StatusWriter, Purging)
PORT = {name: port for port in PORTS for name, _ in inspect.getmembers(port, inspect.isfunction)
        if not name.startswith("_")}


def params(function: object) -> list[str]:
    """Parameter names (Ray adds ``_ray_trace_ctx`` to an actor class's methods)."""
    return [p for p in inspect.signature(function).parameters  # type: ignore[arg-type]
            if p != "_ray_trace_ctx"]


def test_the_owner_and_its_proxy_have_every_port_method_with_the_port_s_parameters() -> None:
    assert {"search_hybrid", "set_statuses", "purge_deleted", "close"} <= PORT.keys()
    for name, owner in PORT.items():
        port = params(getattr(owner, name))
        assert params(getattr(RemoteVectorStore, name)) == port, name
        if name != "close":  # the owner's client closes with the owner (``shutdown``)
            assert params(getattr(StoreOwnerService, name)) == port, name


def test_the_owner_serves_the_port_in_process(tmp_path: Path) -> None:
    emb = HashEmbedder(32)
    owner = StoreOwnerService(Settings(data_dir=tmp_path, embedder="hash", hash_dim=32),
                              emb.dim, tick_s=0.05)
    alice = Scope(tenant="t", user="alice")
    try:
        owner.insert(Collection.FACTS, alice, [StoredRecord(
            id="1", text="allergic to peanuts", vector=emb.encode(["peanuts"])[0].tolist())])
        assert [h.record.id for h in owner.search_lexical(
            Collection.FACTS, alice, "peanuts", 3, None)] == ["1"]
        assert owner.decay_fields(Collection.FACTS, [(alice.key, "1")]) == [DecayFields(
            alice.key, "1", "active", owner.get(Collection.FACTS, alice, ["1"])[0].updated_at,
            None, 1.0)]
        assert owner.set_statuses(Collection.FACTS, [(alice.key, "1", "cold")]) == 1
        assert owner.get(Collection.FACTS, alice, ["1"])[0].status == "cold"
    finally:
        owner.shutdown()

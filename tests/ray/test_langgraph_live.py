"""``StrataStore`` (LangGraph's BaseStore) and the example graph against the real Serve app."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import pytest
from live import wait_status

from serve_app import main
from strata import AsyncClient, Client, errors
from strata.integrations.langgraph import StrataStore
from strata.settings import Settings
from strata.stores.redis_server import EmbeddedRedis, free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_memory.py"


@pytest.fixture(scope="module")
def base(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("langgraph")
    redis_server = EmbeddedRedis(tmp / "redis").start()
    port = free_port()
    settings = Settings(
        data_dir=tmp, embedder="hash", hash_dim=64, http_port=port, redis_url=redis_server.url,
        session_shards=2, extractors=0,
        api_keys={"admin-key": {"tenant": "acme", "role": "admin"},
                  "other-key": {"tenant": "other", "role": "admin"}})
    main.start(settings)
    url = f"http://127.0.0.1:{port}"
    wait_status(f"{url}/readyz", 200)
    try:
        yield url
    finally:
        main.stop(settings, shutdown_ray=False)
        redis_server.stop()


@pytest.fixture
def client(base: str) -> Iterator[Client]:
    with Client(base, api_key="admin-key") as c:
        yield c


def test_put_get_update_search_delete_on_strata(client: Client, base: str) -> None:
    store = StrataStore(client)
    ns = ("ann", "prefs")
    value = {"text": "likes spicy thai curry", "tags": ["thai", "spicy"], "level": 3}
    store.put(ns, "dinner", value)
    store.put(ns, "seat", {"text": "window seat on planes"})
    store.put(ns, "seat", {"text": "aisle seat on planes"})
    store.put(("ann", "work"), "seat", {"text": "desk by the door"})

    item = store.get(ns, "dinner")
    assert item is not None and item.value == value and item.namespace == ns
    assert store.get(ns, "seat").value == {"text": "aisle seat on planes"}  # type: ignore[union-attr]
    seat = next(m for m in client.memories("ann", kind="fact", status="active")["memories"]
                if m["key"] == "seat" and m["scope_tags"] == ["langgraph:prefs"])
    versions = client.history("ann", seat["id"])["versions"]
    assert [v["status"] for v in versions] == ["superseded", "active"]  # superseded, kept

    assert {i.key for i in store.search(ns)} == {"dinner", "seat"}
    assert [i.key for i in store.search(ns, filter={"level": 3})] == ["dinner"]
    ranked = store.search(ns, query="spicy thai curry for dinner")
    assert ranked and ranked[0].key == "dinner" and ranked[0].score is not None
    assert [i.namespace for i in store.search(("ann", "work"), query="seat")] == [("ann", "work")]
    assert store.list_namespaces(prefix=("ann",)) == [("ann", "prefs"), ("ann", "work")]

    # what the store writes is Strata memory: recall returns it to any client of the user
    context = client.recall("ann", "what seat do I like on planes?")["context"]
    assert "aisle seat" in context and "window seat" not in context

    store.delete(ns, "seat")
    assert store.get(ns, "seat") is None
    assert store.get(("ann", "work"), "seat") is not None
    with pytest.raises(errors.InvalidInput):  # Strata never keeps sensitive data long-term
        store.put(ns, "card", {"number": "4111 1111 1111 1111"})
    with Client(base, api_key="other-key") as other:  # the key's tenant is the boundary
        assert StrataStore(other).get(ns, "dinner") is None


def test_the_async_methods_on_strata(base: str) -> None:
    async def run() -> None:
        async with AsyncClient(base, api_key="admin-key") as aclient:
            store = StrataStore(aclient=aclient)
            await store.aput(("bea",), "city", {"city": "lyon"})
            await store.aput(("bea",), "city", {"city": "Lyon"})  # a change of case only
            item = await store.aget(("bea",), "city")
            assert item is not None and item.value == {"city": "Lyon"}
            for city in ("Paris", "Lyon"):  # back to an earlier value: current again
                await store.aput(("bea",), "city", {"city": city})
            item = await store.aget(("bea",), "city")
            assert item is not None and item.value == {"city": "Lyon"}
            assert ("bea",) in await store.alist_namespaces()
            await store.adelete(("bea",), "city")
            assert await store.aget(("bea",), "city") is None

    asyncio.run(run())


class Clock:
    """The store's clock, moved by hand (expiry is the store's, so this holds against the
    real server too)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def test_created_at_stays_and_ttl_expires_on_strata(client: Client) -> None:
    clock = Clock()
    store = StrataStore(client, clock=clock)
    first = clock.now
    store.put(("cy",), "seat", {"seat": "window"}, ttl=1)
    clock.now += timedelta(seconds=30)
    store.put(("cy",), "seat", {"seat": "aisle"}, ttl=1)  # a new version
    clock.now += timedelta(seconds=30)
    store.put(("cy",), "seat", {"seat": "aisle"}, ttl=1)  # reinforced, stamp patched
    item = store.get(("cy",), "seat", refresh_ttl=False)
    assert item is not None and item.value == {"seat": "aisle"}
    assert (item.created_at, item.updated_at) == (first, first + timedelta(seconds=60))
    store.put(("cy",), "food", {"food": "thai"}, ttl=1)
    clock.now += timedelta(seconds=50)
    assert store.get(("cy",), "food") is not None  # read: its expiry moves on
    clock.now += timedelta(seconds=20)  # the seat's minute is over, not the food's
    assert store.get(("cy",), "seat") is None
    assert [i.key for i in store.search(("cy",))] == ["food"]
    facts = client.memories("cy", kind="fact", status="active")["memories"]
    assert [m["key"] for m in facts] == ["food"]  # the expired fact is deleted
    clock.now += timedelta(minutes=2)
    assert store.list_namespaces(prefix=("cy",)) == []
    assert client.memories("cy", kind="fact")["memories"] == []


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("langgraph_memory", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_graph_remembers_and_updates(base: str, client: Client) -> None:
    replies = load_example().main(["--url", base, "--api-key", "admin-key", "--user", "eve"])
    assert replies[0] == "Noted: seat is window."
    assert "window" in replies[1]
    assert "aisle" in replies[3] and "window" not in replies[3]
    facts = client.memories("eve", kind="fact", status="active")["memories"]
    assert [(m["key"], m["scope_tags"]) for m in facts] == [("seat", ["langgraph:preferences"])]

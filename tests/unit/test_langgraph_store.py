"""``StrataStore`` (LangGraph's BaseStore) and the LangChain tools against a fake Strata.

The fake implements the few endpoints the store calls, with Strata's rules that matter here:
a fact with the same key and scope tags as an active one supersedes it, the same value (case
ignored) only reinforces it (its metadata stays), a memory's id is its user, session, key and
value, and a metadata patch merges the keys it names and moves the fact's ``updated_at``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import operator
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError, PutOp, TTLConfig

from strata import NO_RETRY, AsyncClient, Client, errors
from strata.integrations.langchain import StrataRecallTool, StrataRememberTool, strata_tools
from strata.integrations.langgraph import NamespaceMap, StrataStore


@dataclass
class FakeStrata:
    """Users' facts in memory, behind the memories, users and recall endpoints."""

    facts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    clock: int = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        self.calls.append(f"{request.method} {request.url.path}")
        body = json.loads(request.content) if request.content else {}
        if parts == ["v1", "users"]:
            return httpx.Response(200, json={"users": sorted(self.facts), "truncated": False})
        if parts == ["v1", "recall"]:
            return httpx.Response(200, json=self.recall(body["user_id"], body["query"]))
        if parts[:2] == ["v1", "users"] and parts[3:4] == ["memories"]:
            user = parts[2]
            if request.method == "POST":
                return self.create(user, body)
            if request.method == "GET":
                return httpx.Response(200, json={"memories": self.listed(user, request.url)})
            if request.method == "DELETE":
                return self.delete(user, parts[4])
            if request.method == "PATCH":
                return self.patch(user, parts[4], body)
        return httpx.Response(404, json={"error": "not_found", "detail": request.url.path})

    def now(self) -> str:
        self.clock += 1
        return datetime(2026, 1, 1, 0, 0, self.clock, tzinfo=timezone.utc).isoformat()

    def create(self, user: str, body: dict[str, Any]) -> httpx.Response:
        assert body["kind"] == "fact", body
        if len(body["value"]) > 2000:
            return httpx.Response(422, json={"error": "invalid_input", "detail": "value"})
        versions = [m for m in self.facts.setdefault(user, [])
                    if m["key"] == body["key"] and m["scope_tags"] == body["scope_tags"]]
        mid = hashlib.sha1(f"{user}|{body.get('session_id')}|{body['key']}={body['value']}"
                           .encode()).hexdigest()[:16]
        if any(m["id"] == mid for m in versions):
            return httpx.Response(200, json={"memory": next(m for m in versions
                                                            if m["id"] == mid),
                                             "action": "duplicate"})
        active = [m for m in versions if m["status"] == "active"]
        same = [m for m in active if m["value"].lower() == body["value"].lower()]
        if same:
            same[0]["updated_at"] = self.now()
            return httpx.Response(200, json={"memory": same[0], "action": "reinforce"})
        at = self.now()
        for old in active:
            old.update(status="superseded", superseded_by=mid)
        memory = {"id": mid, "kind": "fact", "key": body["key"], "value": body["value"],
                  "text": body["text"], "scope_tags": body["scope_tags"], "status": "active",
                  "metadata": {**body.get("metadata", {}), "mentions": 1},
                  "created_at": at, "updated_at": at}
        self.facts[user].append(memory)
        return httpx.Response(200, json={"memory": memory,
                                         "action": "supersede" if active else "insert"})

    def listed(self, user: str, url: httpx.URL) -> list[dict[str, Any]]:
        status = url.params.get("status")
        found = [m for m in self.facts.get(user, []) if status in (None, m["status"])]
        return sorted(found, key=operator.itemgetter("updated_at"),
                      reverse=True)[:int(url.params["limit"])]

    def delete(self, user: str, memory_id: str) -> httpx.Response:
        memory = next((m for m in self.facts.get(user, []) if m["id"] == memory_id), None)
        if memory is None:
            return httpx.Response(404, json={"error": "not_found", "detail": memory_id})
        self.facts[user] = [m for m in self.facts[user] if m["key"] != memory["key"]
                            or m["scope_tags"] != memory["scope_tags"]]
        return httpx.Response(200, json={"deleted": memory_id})

    def patch(self, user: str, memory_id: str, body: dict[str, Any]) -> httpx.Response:
        memory = next((m for m in self.facts.get(user, []) if m["id"] == memory_id), None)
        if memory is None:
            return httpx.Response(404, json={"error": "not_found", "detail": memory_id})
        assert set(body) == {"metadata"}, body  # the store patches nothing else
        memory["metadata"] = {**memory.get("metadata", {}), **body["metadata"]}
        memory["updated_at"] = self.now()
        return httpx.Response(200, json=memory)

    def recall(self, user: str, query: str) -> dict[str, Any]:
        """Active facts sharing a word with the query, scored by the share of its words."""
        words = set(re.findall(r"\w+", query.lower()))
        items = []
        for m in self.facts.get(user, []):
            hits = len(words & set(re.findall(r"\w+", m["text"].lower())))
            if m["status"] == "active" and hits:
                items.append({"id": m["id"], "layer": "facts", "text": m["text"],
                              "score": hits / len(words)})
        items.sort(key=operator.itemgetter("score"), reverse=True)
        return {"context": "", "items": items, "route": "personal"}


@pytest.fixture
def fake() -> FakeStrata:
    return FakeStrata()


def sync_store(fake: FakeStrata, **options: Any) -> StrataStore:
    return StrataStore(Client("http://x", transport=httpx.MockTransport(fake), retry=NO_RETRY),
                       **options)


def async_store(fake: FakeStrata) -> StrataStore:
    return StrataStore(aclient=AsyncClient("http://x", transport=httpx.MockTransport(fake),
                                           retry=NO_RETRY))


def test_put_get_round_trips_the_value_as_one_fact_of_the_user(fake: FakeStrata) -> None:
    store = sync_store(fake)
    value = {"food": "Pizza", "toppings": ["olive", "basil"], "spicy": False, "n": 2}
    store.put(("ann", "prefs"), "dinner", value)
    item = store.get(("ann", "prefs"), "dinner")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("ann", "prefs"), "dinner", value)
    [fact] = fake.facts["ann"]
    assert fact["key"] == "dinner" and fact["scope_tags"] == ["langgraph:prefs"]
    assert fact["text"] == "dinner: Pizza; olive; basil; False; 2"  # what recall reads
    assert store.get(("ann", "other"), "dinner") is None  # another namespace
    assert store.get(("bob", "prefs"), "dinner") is None  # another user


def test_update_supersedes_and_a_returning_value_is_current_again(fake: FakeStrata) -> None:
    store = sync_store(fake)
    for seat in ("window", "aisle", "window"):
        store.put(("ann",), "seat", {"seat": seat})
    item = store.get(("ann",), "seat")
    assert item is not None and item.value == {"seat": "window"}
    assert [m["status"] for m in fake.facts["ann"]] == ["superseded", "superseded", "active"]


def test_a_change_of_case_only_is_written_not_lost_to_reinforcement(fake: FakeStrata) -> None:
    store = sync_store(fake)
    store.put(("ann",), "city", {"city": "paris"})
    store.put(("ann",), "city", {"city": "Paris"})
    item = store.get(("ann",), "city")
    assert item is not None and item.value == {"city": "Paris"}


def test_same_key_in_two_namespaces_of_a_user_are_two_items(fake: FakeStrata) -> None:
    store = sync_store(fake)
    store.put(("ann", "work"), "lang", {"v": "java"})
    store.put(("ann", "home"), "lang", {"v": "python"})
    assert store.get(("ann", "work"), "lang").value == {"v": "java"}  # type: ignore[union-attr]
    assert store.get(("ann", "home"), "lang").value == {"v": "python"}  # type: ignore[union-attr]


def test_delete_removes_the_fact_with_its_versions(fake: FakeStrata) -> None:
    store = sync_store(fake)
    store.put(("ann",), "seat", {"seat": "window"})
    store.put(("ann",), "seat", {"seat": "aisle"})
    store.delete(("ann",), "seat")
    assert store.get(("ann",), "seat") is None
    assert fake.facts["ann"] == []
    store.delete(("ann",), "seat")  # deleting what is gone is a no-op


def test_search_filters_ranks_by_recall_and_pages(fake: FakeStrata) -> None:
    store = sync_store(fake)
    store.put(("ann", "food"), "dinner", {"text": "likes spicy thai curry", "meal": "dinner"})
    store.put(("ann", "food"), "lunch", {"text": "likes a salad", "meal": "lunch"})
    store.put(("ann", "travel"), "seat", {"text": "window seat please"})
    listed = store.search(("ann",))
    assert [i.key for i in listed] == ["seat", "lunch", "dinner"]  # newest first
    assert [i.key for i in store.search(("ann", "food"))] == ["lunch", "dinner"]
    assert [i.key for i in store.search(("ann",), filter={"meal": "dinner"})] == ["dinner"]
    assert [i.key for i in store.search(("ann",), filter={"meal": {"$ne": "dinner"}})] \
        == ["seat", "lunch"]
    ranked = store.search(("ann",), query="spicy curry for dinner")
    assert [i.key for i in ranked] == ["dinner"] and ranked[0].score == pytest.approx(0.75)
    assert [i.key for i in store.search(("ann",), query="likes salad")] == ["lunch", "dinner"]
    assert [i.key for i in store.search(("ann",), limit=1, offset=1)] == ["lunch"]


def test_search_without_a_user_in_the_prefix_spans_the_tenants_users(fake: FakeStrata) -> None:
    store = sync_store(fake, namespaces=NamespaceMap(user_at=1))
    store.put(("memories", "ann"), "a", {"text": "tea"})
    store.put(("memories", "bob"), "b", {"text": "coffee"})
    found = store.search(("memories",))
    assert sorted(i.namespace for i in found) == [("memories", "ann"), ("memories", "bob")]
    assert fake.facts["ann"][0]["scope_tags"] == ["langgraph:memories"]


def test_list_namespaces_from_users_and_tags(fake: FakeStrata) -> None:
    store = sync_store(fake)
    store.put(("ann", "food"), "k", {"v": 1})
    store.put(("ann", "food", "thai"), "k", {"v": 1})
    store.put(("bob",), "k", {"v": 1})
    assert store.list_namespaces() == [("ann", "food"), ("ann", "food", "thai"), ("bob",)]
    assert store.list_namespaces(prefix=("ann",)) == [("ann", "food"), ("ann", "food", "thai")]
    assert store.list_namespaces(suffix=("thai",)) == [("ann", "food", "thai")]
    assert store.list_namespaces(max_depth=1) == [("ann",), ("bob",)]
    assert store.list_namespaces(prefix=("*", "food")) == [("ann", "food"),
                                                          ("ann", "food", "thai")]
    fake.calls.clear()
    store.list_namespaces(prefix=("ann",))
    assert "GET /v1/users" not in fake.calls  # a prefix that names the user reads only them


def test_extracted_facts_without_the_store_tag_are_not_items(fake: FakeStrata) -> None:
    store = sync_store(fake)
    fake.facts["ann"] = [{"id": "x", "kind": "fact", "key": "diet", "value": "vegan",
                          "text": "diet: vegan", "scope_tags": [], "status": "active",
                          "created_at": fake.now(), "updated_at": fake.now()}]
    assert store.search(("ann",)) == [] and store.get(("ann",), "diet") is None


def test_limits_are_refused_before_or_by_strata(fake: FakeStrata) -> None:
    store = sync_store(fake)
    with pytest.raises(errors.InvalidInput, match="2000"):
        store.put(("ann",), "big", {"text": "x" * 2100})
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):  # straight to batch, past BaseStore's check
        store.batch([PutOp(("ann", "a.b"), "k", {"v": 1})])
    with pytest.raises(InvalidNamespaceError):
        sync_store(fake, namespaces=NamespaceMap(user_at=1)).get(("ann",), "k")
    with pytest.raises(RuntimeError, match="AsyncClient"):
        asyncio.run(sync_store(fake).aget(("ann",), "k"))


def test_the_async_methods_use_the_async_client(fake: FakeStrata) -> None:
    store = async_store(fake)

    async def run() -> None:
        await store.aput(("ann",), "seat", {"seat": "window"})
        await store.aput(("ann",), "seat", {"seat": "aisle"})
        item = await store.aget(("ann",), "seat")
        assert item is not None and item.value == {"seat": "aisle"}
        assert [i.key for i in await store.asearch(("ann",), query="aisle seat")] == ["seat"]
        assert await store.alist_namespaces() == [("ann",)]
        await store.adelete(("ann",), "seat")
        assert await store.aget(("ann",), "seat") is None

    asyncio.run(run())
    with pytest.raises(RuntimeError, match=r"strata\.Client"):
        store.get(("ann",), "seat")


class State(TypedDict):
    user: str
    message: str
    reply: str


def remember_and_recall(state: State, *, store: BaseStore) -> dict[str, str]:
    """A deterministic node: keeps 'I like X' as a preference, answers from what it finds."""
    namespace = (state["user"], "preferences")
    if state["message"].startswith("I like "):
        liked = state["message"].removeprefix("I like ")
        store.put(namespace, "likes", {"text": f"likes {liked}"})
    found = store.search(namespace, query=state["message"])
    return {"reply": "; ".join(i.value["text"] for i in found) or "nothing yet"}


async def aremember_and_recall(state: State, *, store: BaseStore) -> dict[str, str]:
    namespace = (state["user"], "preferences")
    found = await store.asearch(namespace, query=state["message"])
    return {"reply": "; ".join(i.value["text"] for i in found) or "nothing yet"}


def test_a_compiled_state_graph_reads_and_writes_through_the_store(fake: FakeStrata) -> None:
    builder = StateGraph(State)
    builder.add_node("memory", remember_and_recall)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    graph = builder.compile(store=sync_store(fake))
    assert graph.invoke({"user": "ann", "message": "what do I like?", "reply": ""})["reply"] \
        == "nothing yet"
    assert graph.invoke({"user": "ann", "message": "I like green tea", "reply": ""})["reply"] \
        == "likes green tea"
    assert graph.invoke({"user": "ann", "message": "I like black tea", "reply": ""})["reply"] \
        == "likes black tea"  # superseded, not duplicated
    assert graph.invoke({"user": "bob", "message": "tea?", "reply": ""})["reply"] \
        == "nothing yet"

    abuilder = StateGraph(State)
    abuilder.add_node("memory", aremember_and_recall)
    abuilder.add_edge(START, "memory")
    abuilder.add_edge("memory", END)
    agraph = abuilder.compile(store=async_store(fake))
    answer = asyncio.run(agraph.ainvoke({"user": "ann", "message": "tea", "reply": ""}))
    assert answer["reply"] == "likes black tea"


def test_langchain_tools_bind_the_user_and_share_the_dispatcher(fake: FakeStrata) -> None:
    sent: list[dict[str, Any]] = []

    def strata(request: httpx.Request) -> httpx.Response:
        sent.append({"path": request.url.path, **json.loads(request.content or b"{}")})
        return httpx.Response(200, json={"ok": True})

    client = Client("http://x", transport=httpx.MockTransport(strata), retry=NO_RETRY)
    recall = StrataRecallTool(user_id="ann", client=client)
    assert "user_id" not in recall.args
    assert json.loads(recall.invoke({"query": "dinner?"})) == {"ok": True}
    assert sent[-1] == {"path": "/v1/recall", "user_id": "ann", "query": "dinner?",
                        "budget_tokens": 500}
    remember = StrataRememberTool(user_id="ann", client=client)
    refused = json.loads(remember.invoke({"kind": "fact", "key": "seat"}))
    assert refused["error"] == "invalid_input" and len(sent) == 1  # nothing sent
    answer = json.loads(remember.invoke({"user_id": "bob", "key": "seat", "value": "window"}))
    assert answer["error"] == "invalid_input" and len(sent) == 1  # the model can't pick a user
    assert [t.name for t in strata_tools("ann", client=client, names=("recall", "forget"))] \
        == ["recall", "forget"]

    aclient = AsyncClient("http://x", transport=httpx.MockTransport(strata), retry=NO_RETRY)
    tool = StrataRememberTool(user_id="ann", aclient=aclient)
    done = asyncio.run(tool.ainvoke({"key": "seat", "value": "aisle"}))
    assert json.loads(done) == {"ok": True}
    assert sent[-1] == {"path": "/v1/users/ann/memories", "kind": "fact", "key": "seat",
                        "value": "aisle"}


@dataclass
class Clock:
    """The store's clock, moved by hand."""

    now: datetime = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def test_an_update_keeps_created_at_and_moves_updated_at(fake: FakeStrata) -> None:
    clock = Clock()
    store = sync_store(fake, clock=clock)
    first = clock.now
    store.put(("ann",), "seat", {"seat": "window"})
    clock.advance(minutes=5)
    store.put(("ann",), "seat", {"seat": "aisle"})  # a new fact version
    item = store.get(("ann",), "seat")
    assert item is not None and item.value == {"seat": "aisle"}
    assert (item.created_at, item.updated_at) == (first, first + timedelta(minutes=5))
    clock.advance(minutes=5)
    store.put(("ann",), "seat", {"seat": "aisle"})  # the same value: Strata reinforces
    item = store.get(("ann",), "seat")
    assert item is not None
    assert (item.created_at, item.updated_at) == (first, first + timedelta(minutes=10))
    [found] = store.search(("ann",))
    assert (found.created_at, found.updated_at) == (first, first + timedelta(minutes=10))
    store.delete(("ann",), "seat")
    store.put(("ann",), "seat", {"seat": "aisle"})  # deleted, then new: a new item
    item = store.get(("ann",), "seat")
    assert item is not None and item.created_at == clock.now


def test_an_item_past_its_ttl_is_not_returned_and_is_deleted(fake: FakeStrata) -> None:
    clock = Clock()
    store = sync_store(fake, clock=clock)
    store.put(("ann", "prefs"), "seat", {"seat": "window"}, ttl=1)
    store.put(("ann", "prefs"), "food", {"food": "thai"})  # no ttl: stays
    store.put(("ann", "trips"), "next", {"city": "Lisbon"}, ttl=1)
    clock.advance(seconds=59)
    assert store.get(("ann", "prefs"), "seat", refresh_ttl=False) is not None
    assert store.list_namespaces() == [("ann", "prefs"), ("ann", "trips")]
    clock.advance(seconds=1)
    assert store.get(("ann", "prefs"), "seat") is None
    assert [i.key for i in store.search(("ann",))] == ["food"]
    assert [i.key for i in store.search(("ann",), query="window seat Lisbon thai")] == ["food"]
    assert store.list_namespaces() == [("ann", "prefs")]
    assert [m["key"] for m in fake.facts["ann"]] == ["food"]  # the expired facts are gone


def test_a_read_refreshes_the_ttl_unless_told_not_to(fake: FakeStrata) -> None:
    clock = Clock()
    store = sync_store(fake, clock=clock)
    store.put(("ann",), "seat", {"seat": "window"}, ttl=1)
    store.put(("ann",), "food", {"food": "thai"}, ttl=1)
    clock.advance(seconds=50)
    assert store.get(("ann",), "seat") is not None  # refreshed: expires at 1:50
    assert store.get(("ann",), "food", refresh_ttl=False) is not None
    clock.advance(seconds=20)  # 1:10
    assert store.get(("ann",), "food") is None
    item = store.get(("ann",), "seat")
    assert item is not None and item.updated_at == clock.now - timedelta(seconds=70)
    clock.advance(seconds=50)  # 2:00, 50 s after the last read
    assert [i.key for i in store.search(("ann",))] == ["seat"]  # a search refreshes too
    clock.advance(seconds=50)
    assert [i.key for i in store.search(("ann",), refresh_ttl=False)] == ["seat"]
    clock.advance(seconds=10)
    assert store.search(("ann",)) == []


def test_the_ttl_config_gives_the_default_ttl_and_read_refresh(fake: FakeStrata) -> None:
    clock = Clock()
    store = sync_store(fake, clock=clock,
                       ttl=TTLConfig(default_ttl=2, refresh_on_read=False))
    store.put(("ann",), "seat", {"seat": "window"})  # the default ttl
    store.put(("ann",), "food", {"food": "thai"}, ttl=None)  # none, said so
    clock.advance(minutes=1)
    assert store.get(("ann",), "seat") is not None  # no refresh by default
    clock.advance(minutes=1)
    assert store.get(("ann",), "seat") is None
    clock.advance(days=365)
    assert store.get(("ann",), "food") is not None
    store.put(("ann",), "food", {"food": "thai"}, ttl=1)  # a put sets the item's ttl anew
    clock.advance(minutes=1)
    assert store.get(("ann",), "food") is None


def test_the_async_methods_keep_the_ttl(fake: FakeStrata) -> None:
    clock = Clock()
    store = StrataStore(aclient=AsyncClient("http://x", transport=httpx.MockTransport(fake),
                                            retry=NO_RETRY), clock=clock)

    async def run() -> None:
        await store.aput(("ann",), "seat", {"seat": "window"}, ttl=1)
        clock.advance(seconds=30)
        assert await store.aget(("ann",), "seat") is not None
        clock.advance(seconds=60)
        assert await store.aget(("ann",), "seat") is None

    asyncio.run(run())
    assert fake.facts["ann"] == []

"""The Serve application on local Ray: health, readiness, and the session endpoints over HTTP."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import ray
from live import wait_status

from actors.directory import ShardDirectory, shard_name
from actors.placement import KEEPER_NAME
from actors.store_owner import OWNER_NAME
from serve_app import main
from serve_app.app import AppArgs, build_app
from strata.models import Scope
from strata.settings import Settings
from strata.shard.ring import ShardRing
from strata.stores.keys import SessionRef, parse_scope_key
from strata.stores.redis import QUEUE_LOW, RedisStore
from strata.stores.redis_server import EmbeddedRedis, free_port

AUTH = {"Authorization": "Bearer dev"}


@dataclass
class App:
    base: str
    settings: Settings
    redis_server: EmbeddedRedis
    redis: RedisStore

    def post(self, path: str, body: dict[str, object], **kw: object) -> httpx.Response:
        return httpx.post(f"{self.base}{path}", json=body, headers=kw.get("headers", AUTH),
                          timeout=30)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def app(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    tmp = tmp_path_factory.mktemp("app")
    redis_server = EmbeddedRedis(tmp / "redis").start()
    port = free_port()
    settings = Settings(data_dir=tmp, embedder="hash", hash_dim=64, http_port=port,
                        redis_url=redis_server.url, session_shards=2, max_turn_bytes=2000)
    main.start(settings)
    base = f"http://127.0.0.1:{port}"
    wait_status(f"{base}/readyz", 200)
    handle = App(base, settings, redis_server, RedisStore(redis_server.url,
                                                          settings.redis_prefix))
    try:
        yield handle
    finally:
        main.stop(settings, shutdown_ray=False)
        handle.redis.close()
        handle.redis_server.stop()  # the test that crashes Redis leaves its successor here


def test_health_and_ready(app: App) -> None:
    assert httpx.get(f"{app.base}/healthz", timeout=10).json() == {"status": "ok"}
    assert httpx.get(f"{app.base}/readyz", timeout=30).json() == {
        "ready": True, "checks": {"milvus": "ok", "redis": "ok", "embedder": "ok"}}


def test_turns_working_memory_task_state_close(app: App) -> None:
    for i in range(12):
        resp = app.post("/v1/sessions/trip/turns",
                        {"user_id": "alice", "role": "user", "content": f"step {i} costs {i}0 EUR"})
        assert resp.status_code == 200, resp.text
    assert resp.json()["turn_id"] == "trip:12"
    patched = httpx.patch(f"{app.base}/v1/sessions/trip/task-state", headers=AUTH, timeout=30,
                          json={"user_id": "alice", "patch": {"goal": "book"}})
    assert patched.json()["task_state"]["goal"] == "book"
    wm = httpx.get(f"{app.base}/v1/sessions/trip/working-memory",
                   params={"user_id": "alice"}, headers=AUTH, timeout=30).json()
    assert wm["turn_count"] == 12 and len(wm["window"]) == 8 and "step 3" in wm["summary"]
    assert wm["task_state"]["goal"] == "book"
    closed = app.post("/v1/sessions/trip/close", {"user_id": "alice"}).json()
    assert closed["closed"] and closed["extraction_job"]
    assert any(p["session_id"] == "trip" for _, p in app.redis.queues.entries(QUEUE_LOW))


def test_turn_batch_over_http(app: App) -> None:
    turns = [{"role": "user" if i % 2 else "assistant", "content": f"step {i} costs {i}0 EUR",
              "turn_id": f"b{i}", "metadata": {"n": i}} for i in range(1, 11)]
    resp = app.post("/v1/sessions/batch/turns/batch", {"user_id": "alice", "turns": turns})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["session_id"] == "batch"
    assert [(a["turn_id"], a["turn_count"], a["duplicate"]) for a in body["acks"]] == [
        (f"b{i}", i, False) for i in range(1, 11)]
    again = app.post("/v1/sessions/batch/turns/batch", {"user_id": "alice", "turns": turns})
    assert all(a["duplicate"] for a in again.json()["acks"])
    wm = httpx.get(f"{app.base}/v1/sessions/batch/working-memory",
                   params={"user_id": "alice"}, headers=AUTH, timeout=30).json()
    assert wm["turn_count"] == 10
    assert [t["turn_id"] for t in wm["window"]] == [f"b{i}" for i in range(3, 11)]
    assert wm["window"][-1]["metadata"] == {"n": 10} and "step 1 " in wm["summary"]
    bad = app.post("/v1/sessions/batch2/turns/batch", {"user_id": "alice", "turns": [
        turns[0], {"role": "user", "content": "x" * 2001}]})
    assert bad.status_code == 422 and "turn 1" in bad.json()["detail"]
    assert app.post("/v1/sessions/batch2/turns/batch",
                    {"user_id": "alice", "turns": []}).status_code == 422
    assert app.redis.sessions.read(SessionRef.parse("default:alice:batch2")) == []


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"user_id": "alice", "role": "robot", "content": "x"}, 422),
        ({"user_id": "alice", "role": "user", "content": ""}, 422),
        ({"user_id": "alice", "role": "user", "content": "x" * 2001}, 422),
        ({"user_id": "alice", "role": "user"}, 422),
        ({"user_id": "bad user!", "role": "user", "content": "x"}, 422),
        ({"user_id": "alice", "role": "user", "content": "x", "surprise": 1}, 422),
    ],
)
def test_bad_turns_get_4xx_and_write_nothing(app: App, body: dict[str, object],
                                             status: int) -> None:
    resp = app.post("/v1/sessions/badinput/turns", body)
    assert resp.status_code == status
    assert set(resp.json()) == {"error", "detail"}
    assert app.redis.sessions.read(SessionRef.parse("default:alice:badinput")) == []


def test_auth_and_unknown_session(app: App) -> None:
    body = {"user_id": "alice", "role": "user", "content": "hi"}
    assert app.post("/v1/sessions/s/turns", body, headers={}).status_code == 401
    bad = app.post("/v1/sessions/s/turns", body, headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and bad.json()["error"] == "unauthorized"
    missing = httpx.get(f"{app.base}/v1/sessions/nope/working-memory",
                        params={"user_id": "alice"}, headers=AUTH, timeout=30)
    assert missing.status_code == 404


class _Writer:
    """Turns for one user's session, each retried with its ``turn_id`` until acknowledged."""

    def __init__(self, app: App, user: str, session: str) -> None:
        self.app, self.user, self.session = app, user, session
        self.acked: list[str] = []
        self.longest_gap_s = 0.0  # the longest time without an acknowledged turn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write)

    def _write(self) -> None:
        n, last = 0, time.monotonic()
        while not self._stop.is_set():
            n += 1
            turn_id = f"c{n}"
            while True:
                try:
                    resp = self.app.post(f"/v1/sessions/{self.session}/turns", {
                        "user_id": self.user, "role": "user", "content": f"fact number {n}",
                        "turn_id": turn_id})
                    if resp.status_code == 200:
                        self.acked.append(turn_id)
                        now = time.monotonic()
                        self.longest_gap_s = max(self.longest_gap_s, now - last)
                        last = now
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)

    def wait_acked(self, count: int, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < count:
            assert time.monotonic() < deadline, "writes never resumed"
            time.sleep(0.05)

    def __enter__(self) -> _Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def check_all_kept(self) -> None:
        """Every acknowledged turn is in the session, once, in order."""
        wm = httpx.get(f"{self.app.base}/v1/sessions/{self.session}/working-memory",
                       params={"user_id": self.user}, headers=AUTH, timeout=30).json()
        assert wm["turn_count"] == len(self.acked) == len(set(self.acked))
        in_wal = [r["turn"]["turn_id"] for _, r in self.app.redis.sessions.read(
            SessionRef.parse(f"default:{self.user}:{self.session}")) if r["op"] == "turn"]
        assert in_wal == self.acked
        assert [t["turn_id"] for t in wm["window"]] == self.acked[-8:]


def test_killed_shard_loses_no_acknowledged_turn(app: App) -> None:
    """SIGKILL the shard process mid-session while a client keeps writing."""
    with _Writer(app, "carol", "crash") as writer:
        writer.wait_acked(20)
        handles = [ray.get_actor(shard_name(i), namespace=main.NAMESPACE) for i in range(2)]
        pids = [ray.get(h.pid.remote()) for h in handles]
        # kill every shard: whichever owns carol dies mid-session
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        writer.wait_acked(len(writer.acked) + 20)
    writer.check_all_kept()
    print(f"every shard kill -9ed: {len(writer.acked)} turns acknowledged, 0 lost, 0 "
          f"duplicated; longest time without an acknowledged turn {writer.longest_gap_s:.1f}s")


def test_a_moved_shard_loses_no_acknowledged_turn_and_is_found_again(app: App) -> None:
    """The placement keeper's move (stop, start again elsewhere under the same name) while a
    client writes to each shard: the ingress finds the new actors (a call that met the old
    one got 503 and was retried); nothing acknowledged is lost. One node here, so each
    shard moves to the node it is on: a new process all the same."""
    shards = ShardDirectory.find(2, main.NAMESPACE)
    keeper = ray.get_actor(KEEPER_NAME, namespace=main.NAMESPACE)
    assert ray.get(keeper.rebalance_once.remote()) is None  # one node: nothing to even out
    ring = ShardRing(2)
    users = [next(u for u in (f"mover-{i}" for i in range(100))
                  if ring.shard_for(Scope(tenant="default", user=u)) == shard)
             for shard in (0, 1)]
    with _Writer(app, users[0], "moving") as first, _Writer(app, users[1], "moving") as second:
        for writer in (first, second):
            writer.wait_acked(20)
        for index in range(2):
            before = ray.get(shards.at(index).pid.remote())
            node = ray.get(shards.at(index).node_id.remote())
            moved = shards.move(index, node)
            assert ray.get(moved.pid.remote()) != before
            for writer in (first, second):
                writer.wait_acked(len(writer.acked) + 20)
    first.check_all_kept()
    second.check_all_kept()
    print(f"both shards moved: {len(first.acked) + len(second.acked)} turns acknowledged, 0 "
          f"lost, 0 duplicated; longest time without an acknowledged turn "
          f"{max(first.longest_gap_s, second.longest_gap_s):.1f}s")
    assert ray.get(keeper.moves.remote()) == []


def test_readyz_reports_a_dead_redis_and_recovers(app: App) -> None:
    acked = app.post("/v1/sessions/r/turns",
                     {"user_id": "dave", "role": "user", "content": "before the crash"})
    assert acked.status_code == 200
    app.redis_server.kill()
    down = wait_status(f"{app.base}/readyz", 503).json()
    assert down["checks"]["redis"] != "ok" and down["checks"]["milvus"] == "ok"
    failed = app.post("/v1/sessions/r/turns",
                      {"user_id": "dave", "role": "user", "content": "during"})
    assert failed.status_code == 503 and failed.json()["error"] == "redis_unavailable"
    app.redis_server = EmbeddedRedis(app.redis_server.data_dir,
                                     port=app.redis_server.port).start()
    wait_status(f"{app.base}/readyz", 200)
    wal = app.redis.sessions.read(SessionRef.parse("default:dave:r"))
    turns = [r["turn"]["content"] for _, r in wal if r["op"] == "turn"]
    assert turns == ["before the crash"]


def test_recall_over_http_routes_budget_debug_and_metrics(app: App) -> None:
    for i in range(10):
        app.post("/v1/sessions/rc/turns", {"user_id": "rita", "role": "user",
                                           "content": f"we compared hotel {i} near the beach"})
    app.post("/v1/users/rita/memories", {"kind": "fact", "key": "budget",
                                         "value": "under 200 EUR a night",
                                         "text": "My hotel budget is under 200 EUR a night"})
    personal = app.post("/v1/recall", {"user_id": "rita", "query": "what is my hotel budget?",
                                       "session_id": "rc", "debug": True}).json()
    assert personal["route"] == "personal"
    assert personal["layers"] == ["working", "facts", "episodes", "procedures"]
    assert personal["context"].index("## Working memory") < personal["context"].index(
        "## Long-term memory")
    cand = personal["debug"]["candidates"][0]
    assert {"similarity", "time_decay", "confidence", "type_priority"} <= set(cand["parts"])
    docs = app.post("/v1/recall", {"user_id": "rita", "query": "how do I configure the api?"})
    assert docs.json()["route"] == "knowledge" and "episodes" not in docs.json()["layers"]
    for budget in (50, 120):
        small = app.post("/v1/recall", {"user_id": "rita", "query": "hotel", "session_id": "rc",
                                        "budget_tokens": budget}).json()
        from strata.tokens import count_tokens

        assert 0 < count_tokens(small["context"]) <= budget
    assert app.post("/v1/recall", {"user_id": "rita", "query": "x",
                                   "budget_tokens": 10}).status_code == 422
    nobody = app.post("/v1/recall", {"user_id": "nobody", "query": "hotel",
                                     "layers": ["facts", "episodes"]})
    assert nobody.status_code == 200 and nobody.json()["items"] == []
    # an unknown user still shares the tenant's knowledge base, never anyone's memories
    mixed = app.post("/v1/recall", {"user_id": "nobody", "query": "how do I recall context?"})
    assert {i["layer"] for i in mixed.json()["items"]} <= {"knowledge"}
    text = httpx.get(f"{app.base}/metrics", headers=AUTH, timeout=30).text
    for name in ("strata_requests_total", "strata_recall_layer_seconds_bucket",
                 "strata_queue_backlog", "strata_extraction_lag_seconds",
                 "strata_vector_flushes"):
        assert name in text, name


def test_the_hot_path_survives_a_killed_shard(app: App) -> None:
    """The shard's hot index answers; a SIGKILLed shard rebuilds the user lazily from Milvus
    and answers the same; reinforcement reaches Milvus without a recall touching it. There
    is no other path: the recipe "store" (the deleted Milvus-through-a-deployment path) is
    an unknown recipe."""
    for text in ("I adopted a cat named Miso in March", "We repainted the kitchen yellow",
                 "My sister visits every Sunday", "I run 5 km before work"):
        assert app.post("/v1/users/hana/memories", {"kind": "episode", "text": text}
                        ).status_code == 200
    query = {"user_id": "hana", "query": "what is the name of my cat?",
             "layers": ["facts", "episodes"]}
    hot = app.post("/v1/recall", query).json()
    assert hot["items"] and "Miso" in hot["items"][0]["text"]
    gone = app.post("/v1/recall", {**query, "recipe": "store"})
    assert gone.status_code == 422 and "unknown recipe 'store'" in gone.json()["detail"]
    stats = httpx.get(f"{app.base}/v1/admin/hot-index", headers=AUTH, timeout=30).json()
    assert sum(s["users"] for s in stats["shards"]) >= 1
    for i in range(2):
        os.kill(ray.get(ray.get_actor(shard_name(i), namespace=main.NAMESPACE).pid.remote()),
                signal.SIGKILL)
    deadline = time.monotonic() + 90
    while True:
        resp = app.post("/v1/recall", query)
        if resp.status_code == 200:
            break
        assert resp.status_code == 503 and time.monotonic() < deadline
        time.sleep(0.2)
    assert [i["id"] for i in resp.json()["items"]] == [i["id"] for i in hot["items"]]
    deadline = time.monotonic() + 40  # persisted in batches (10 s by default), not per recall
    while True:
        listed = httpx.get(f"{app.base}/v1/users/hana/memories", params={"kind": "episode"},
                           headers=AUTH, timeout=30).json()["memories"]
        cat = next(m for m in listed if "Miso" in m["text"])
        if cat["access_count"] >= 1:
            break
        assert time.monotonic() < deadline
        time.sleep(0.5)


def test_knowledge_import_versions_and_validation_over_http(app: App) -> None:
    p1 = "Returns are accepted within 14 days of delivery if the item is unused. " * 5
    p2 = "Express shipping costs 9 euros and arrives the next working day. " * 5
    p3 = "Loyalty points expire after two years without a purchase. " * 5
    v1 = app.post("/v1/knowledge/documents", {"documents": [
        {"doc_id": "shop/policy", "text": "\n\n".join([p1, p2, p3])}]})
    assert v1.status_code == 200 and v1.json()["added"] == 3
    v2_text = "\n\n".join([p1.replace("14 days", "30 days"), p2])
    v2 = app.post("/v1/knowledge/documents", {"documents": [
        {"doc_id": "shop/policy", "text": v2_text}]}).json()
    assert (v2["added"], v2["deprecated"], v2["unchanged"]) == (1, 2, 1)
    found = app.post("/v1/knowledge/search", {"query": "how many days to return an item"})
    texts = " ".join(r["text"] for r in found.json()["results"])
    assert "30 days" in texts and "14 days" not in texts and "Loyalty" not in texts
    doc = httpx.get(f"{app.base}/v1/knowledge/documents/shop/policy", headers=AUTH,
                    timeout=30).json()
    assert sorted(c["status"] for c in doc["chunks"]) == [
        "active", "active", "deprecated", "deprecated"]
    again = app.post("/v1/knowledge/documents", {"documents": [
        {"doc_id": "shop/policy", "text": v2_text}]}).json()
    assert (again["added"], again["deprecated"]) == (0, 0)
    bad = app.post("/v1/knowledge/documents", {
        "documents": [{"doc_id": "shop/other", "text": "Completely unrelated gardening tips."}],
        "validate": [{"question": "how many days to return an item",
                      "expect_doc_id": "shop/nonexistent"}]})
    assert bad.status_code == 422 and "previous versions stay active" in bad.json()["detail"]
    assert httpx.get(f"{app.base}/v1/knowledge/documents/shop/other", headers=AUTH,
                     timeout=30).status_code == 404


def test_inspector_endpoints_are_tenant_scoped(app: App) -> None:
    def get(path: str, **params: object) -> httpx.Response:
        return httpx.get(f"{app.base}{path}", params=params, headers=AUTH,  # type: ignore[arg-type]
                         timeout=30)

    assert get("/v1/whoami").json() == {"tenant": "default", "role": "admin", "agent": None}
    app.post("/v1/users/ivy/memories", {"kind": "fact", "key": "city", "value": "Oslo"})
    # another tenant's user in the shared registry
    app.redis.users.register(parse_scope_key("globex:zed"))
    users = get("/v1/users").json()
    assert "ivy" in users["users"] and "zed" not in users["users"]
    assert get("/v1/users", q="IV").json()["users"] == ["ivy"]
    for params in ({"limit": 0}, {"limit": 10_001}, {"q": "x" * 129}):
        bad = get("/v1/users", **params)
        assert bad.status_code == 422 and set(bad.json()) == {"error", "detail"}
    assert get("/v1/users/ivy/memories", status="bogus").status_code == 422
    assert get("/v1/users/ivy/memories", status="active").json()["memories"][0]["value"] == "Oslo"
    for path in ("/v1/whoami", "/v1/users", "/v1/knowledge/documents", "/v1/queues"):
        assert httpx.get(f"{app.base}{path}", timeout=30).status_code == 401, path

    for text in ("Opening hours are nine to five on weekdays. " * 8,
                 "Opening hours are ten to six on weekdays. " * 8):
        app.post("/v1/knowledge/documents", {"documents": [
            {"doc_id": "insp/hours", "title": "Hours", "text": text}]})
    docs = {d["doc_id"]: d for d in get("/v1/knowledge/documents").json()["documents"]}
    assert docs["insp/hours"]["versions"] == [1, 2] and docs["insp/hours"]["title"] == "Hours"
    assert docs["insp/hours"]["chunks"] == {"active": 1, "deprecated": 1}

    queues = get("/v1/queues").json()
    assert queues["tenant"] == "default"
    assert [q["queue"] for q in queues["queues"]] == ["q:ltm:high", "q:ltm:low"]
    assert {"backlog", "lag_s", "by_user", "by_type", "system"} <= set(queues["queues"][0])


def test_inspector_page_is_served_offline_and_nothing_else(app: App) -> None:
    root = httpx.get(f"{app.base}/ui", timeout=30)
    assert root.status_code == 307 and root.headers["location"] == "/ui/"
    page = httpx.get(f"{app.base}/ui/", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN, no absolute URL
    for asset, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        resp = httpx.get(f"{app.base}/ui/{asset}", timeout=30)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith(kind)
        assert "https://" not in resp.text and "http://" not in resp.text
    for name in ("inspector.py", "..%2Finspector.py", "nope.html"):
        assert httpx.get(f"{app.base}/ui/{name}", timeout=30).status_code == 404, name


def test_build_app_validates_args() -> None:
    with pytest.raises(ValueError):
        build_app({"embedder_replicas": 0})
    assert AppArgs.model_validate({}).namespace == "strata"


def test_recall_degrades_to_working_memory_when_the_store_is_down(app: App) -> None:
    app.post("/v1/sessions/deg/turns", {"user_id": "uma", "role": "user",
                                        "content": "the blue connector is loose"})
    owner = ray.get_actor(OWNER_NAME, namespace=main.NAMESPACE)
    ray.kill(owner, no_restart=True)  # the vector store is gone
    resp = app.post("/v1/recall", {"user_id": "uma", "query": "what was loose?",
                                   "session_id": "deg"})
    assert resp.status_code == 200
    body = resp.json()
    assert body["degraded"] is True and "blue connector" in body["context"]

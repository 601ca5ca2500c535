"""A WAL append whose reply is lost is resent by redis-py (``retry_on_timeout``); the resend
must not append the turns a second time. Against a real redis-server, through a proxy that
forwards the append and drops the connection before its reply reaches the client."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from strata.models import Scope
from strata.stores.keys import SessionRef
from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis

pytestmark = pytest.mark.redis


class ReplyDropper:
    """A TCP proxy to Redis that, once armed, forwards the next command carrying ``marker``
    and closes the client's connection instead of passing the reply back."""

    def __init__(self, port: int, marker: bytes) -> None:
        self._upstream = port
        self._marker = marker
        self.armed = False
        self.dropped = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._upstream))
            threading.Thread(target=self._pump_up, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(upstream, client), daemon=True).start()

    def _pump_up(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                upstream.sendall(data)
                if self.armed and self._marker in data:
                    self.armed = False
                    self.dropped += 1
                    # the write reaches Redis; wait for it to have run, then the reply is lost
                    upstream.recv(65536)
                    client.close()
                    upstream.close()
                    return
        except OSError:
            pass

    @staticmethod
    def _pump_down(upstream: socket.socket, client: socket.socket) -> None:
        try:
            while data := upstream.recv(65536):
                client.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def dropper(redis_server: EmbeddedRedis) -> Iterator[ReplyDropper]:
    proxy = ReplyDropper(redis_server.port, marker=b"EVALSHA")
    yield proxy
    proxy.close()


def turn(turn_id: str) -> dict[str, object]:
    return {"op": "turn", "turn": {"turn_id": turn_id, "content": f"words of {turn_id}"}}


def test_a_resent_append_whose_reply_was_lost_writes_each_turn_once(
        dropper: ReplyDropper) -> None:
    store = RedisStore(f"redis://127.0.0.1:{dropper.port}/0", prefix="t:resend:")
    ref = SessionRef(Scope(tenant="t", user="u"), "s")
    try:
        log = store.sessions
        first = log.append_turns(ref, [turn("a")], ["a"])  # loads the script: not dropped
        dropper.armed = True
        ids = log.append_turns(ref, [turn("b"), turn("c")], ["b", "c"])
        assert dropper.dropped == 1  # the reply of the first send was lost, and resent
        entries = log.read(ref)
        assert [r["turn"]["turn_id"] for _, r in entries] == ["a", "b", "c"]
        assert [rid for rid, _ in entries] == [*first, *ids]  # the resend names the first write
        assert log.known_turn_ids(ref, ["a", "b", "c"]) == {"a", "b", "c"}
    finally:
        store.sessions.delete(ref)
        store.close()


def test_the_append_script_writes_nothing_twice_when_called_again(
        redis_server: EmbeddedRedis) -> None:
    store = RedisStore(redis_server.url, prefix="t:resend-twice:")
    ref = SessionRef(Scope(tenant="t", user="u"), "s")
    try:
        log = store.sessions
        once = log.append_turns(ref, [turn("x"), turn("y")], ["x", "y"])
        again = log.append_turns(ref, [turn("x"), turn("y")], ["x", "y"])
        assert again == once
        assert [r["turn"]["turn_id"] for _, r in log.read(ref)] == ["x", "y"]
        # records without an id are always written
        log.append_turns(ref, [{"op": "task", "task_state": {}}])
        assert len(log.read(ref)) == 3
    finally:
        store.sessions.delete(ref)
        store.close()

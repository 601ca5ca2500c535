"""The soak benchmark's load (bench/soak.py): the operation mix, a small knowledge base,
and the next request of each kind for a set of users, with what the answers told (the ids
of memories created, to forget later; the turns still out, so a session is closed only
after them)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.common.topics import FACT_QUERIES, KEYWORD_QUERIES, TOPICS, fill

__all__ = ["KNOWLEDGE", "MIX", "Request", "SoakWorkload", "UserState", "choose_ops"]

Request = tuple[str, str, str, dict[str, Any] | None]  # kind, method, url, body or params

# the share of each operation in the load
MIX = {"turn": 0.52, "recall": 0.25, "list": 0.08, "remember": 0.06, "forget": 0.05,
       "knowledge": 0.04}
KNOWLEDGE = [
    {"doc_id": "soak/returns", "title": "Returns", "text": "Items can be returned within 30 "
     "days with the receipt. Refunds go back to the original card within five days."},
    {"doc_id": "soak/shipping", "title": "Shipping", "text": "Standard shipping takes three "
     "to five working days. Express shipping arrives the next working day."},
    {"doc_id": "soak/support", "title": "Support", "text": "Support answers by chat from 8 "
     "to 20 on weekdays. Urgent problems can be reported by phone at any time."},
]
KB_QUERIES = ("how long do refunds take", "when does express shipping arrive",
              "support opening hours", "can I return an item without a receipt")


def choose_ops(n: int, mix: dict[str, float], seed: int) -> list[str]:
    """``n`` operation kinds drawn with the weights of ``mix`` (reproducible by ``seed``)."""
    rng = random.Random(seed)
    kinds = list(mix)
    return rng.choices(kinds, weights=[mix[k] for k in kinds], k=n)


@dataclass
class UserState:
    user_id: str
    topics: list[Any]
    session: int = 1
    turns_left: int = 0
    to_close: str | None = None  # a finished session, closed once none of its turns is out
    memories: list[str] = field(default_factory=list)
    closed: int = 0  # sessions closed since the user was last erased
    erasing: bool = False  # a DELETE of the user is out


class SoakWorkload:
    """The next request of each kind for ``n_users`` users, with what the answers told
    (created memory ids, to forget later)."""

    def __init__(self, base: str, n_users: int, tag: str, seed: int,
                 churn_sessions: int = 0) -> None:
        self.base = base
        # > 0: a user is erased (DELETE /v1/users/{id}, admin) after that many closed
        # sessions and starts again empty, so the data stays about the same size
        self.churn_sessions = churn_sessions
        self.erased = 0
        self.rng = random.Random(seed)
        self.users = [UserState(f"soak-{i:02d}-{tag}", self.rng.sample(TOPICS, 3))
                      for i in range(n_users)]
        for u in self.users:
            u.turns_left = self.rng.randint(8, 16)
        self.closed = 0
        self.remembered = 0
        self.in_flight: Counter[tuple[str, str]] = Counter()  # turns out per (user, session)
        self.writes_out: Counter[str] = Counter()  # closes, remember, forget out per user

    def _sentence(self, u: UserState) -> str:
        topic = self.rng.choice(u.topics)
        pool = topic.facts if self.rng.random() < 0.6 else topic.episodes
        return fill(self.rng.choice(pool), self.rng, topic)

    def request(self, kind: str) -> Request:
        """``(kind, method, url, json body or query params)``; forget without a memory to
        forget becomes a listing."""
        u = self.rng.choice([x for x in self.users if not x.erasing] or self.users)
        sid = f"s{u.session}"
        if kind == "turn":
            return self._turn_or_close(u)
        if kind == "recall":
            topic = self.rng.choice(u.topics)
            pool = FACT_QUERIES if self.rng.random() < 0.7 else KEYWORD_QUERIES
            return ("recall", "POST", f"{self.base}/v1/recall",
                    {"user_id": u.user_id, "query": fill(self.rng.choice(pool), self.rng, topic),
                     "session_id": sid, "top_k": 10, "budget_tokens": 500})
        if kind == "remember":
            self.remembered += 1
            self.writes_out[u.user_id] += 1
            return ("remember", "POST", f"{self.base}/v1/users/{u.user_id}/memories",
                    {"kind": "fact", "key": f"soak_note_{self.remembered}",
                     "value": self._sentence(u)})
        if kind == "forget":
            owner = next((x for x in self.rng.sample(self.users, len(self.users))
                          if x.memories and not x.erasing), None)
            if owner is not None:
                memory_id = owner.memories.pop(0)
                self.writes_out[owner.user_id] += 1
                return ("forget", "DELETE",
                        f"{self.base}/v1/users/{owner.user_id}/memories/{memory_id}", None)
            kind = "list"
        if kind == "list":
            return ("list", "GET", f"{self.base}/v1/users/{u.user_id}/memories",
                    {"limit": 50})
        return ("knowledge", "POST", f"{self.base}/v1/knowledge/search",
                {"query": self.rng.choice(KB_QUERIES), "top_k": 3})

    def _turn_or_close(self, u: UserState) -> Request:
        """The user's next turn; after 8-16 turns the user moves to a new session, and the
        finished one is closed by a later turn request once none of its turns is in flight
        (a close overtaking a turn would make that turn a 409, the benchmark's doing)."""
        old = u.to_close
        if (self.churn_sessions and u.closed >= self.churn_sessions and old is None
                and not self.writes_out[u.user_id]
                and not any(n for (uid, _), n in self.in_flight.items() if uid == u.user_id)):
            u.erasing, u.closed, u.memories = True, 0, []
            self.erased += 1
            return ("erase", "DELETE", f"{self.base}/v1/users/{u.user_id}", None)
        if old is not None and not self.in_flight[(u.user_id, old)]:
            u.to_close = None
            u.closed += 1
            self.closed += 1
            self.writes_out[u.user_id] += 1
            return ("close", "POST", f"{self.base}/v1/sessions/{old}/close",
                    {"user_id": u.user_id})
        if u.turns_left <= 0 and old is None:
            u.to_close = f"s{u.session}"
            u.session += 1
            u.turns_left = self.rng.randint(8, 16)
        u.turns_left -= 1
        sid = f"s{u.session}"
        self.in_flight[(u.user_id, sid)] += 1
        return ("turn", "POST", f"{self.base}/v1/sessions/{sid}/turns",
                {"user_id": u.user_id, "role": "user", "content": self._sentence(u)})

    def finished(self, kind: str, url: str, body: dict[str, Any] | None) -> None:
        """A request has come back (answered or not)."""
        if kind == "turn" and body is not None:
            self.in_flight[(body["user_id"], url.split("/")[-2])] -= 1
        elif kind == "close" and body is not None:
            self.writes_out[body["user_id"]] -= 1
        elif kind in ("remember", "forget"):
            self.writes_out[url.split("/v1/users/")[1].split("/")[0]] -= 1
        elif kind == "erase":
            user_id = url.rstrip("/").split("/")[-1]
            for u in self.users:
                if u.user_id == user_id:
                    u.erasing = False

    def answered(self, kind: str, url: str, data: Any) -> None:
        if kind == "remember" and isinstance(data, dict) and "memory" in data:
            user_id = url.rstrip("/").split("/")[-2]
            for u in self.users:
                if u.user_id == user_id:
                    u.memories.append(data["memory"]["id"])

"""What a latency benchmark writes and asks: LoCoMo conversations and synthetic users as
sessions of turns, and the questions to recall with.

LoCoMo conversations become turns exactly as the evaluation harness writes them
(``strata.eval.locomo``: one user per conversation, one session per LoCoMo session with its
real date, both speakers as ``user`` turns prefixed with the speaker's name, turn ids
``s<session>:<n>``); the questions
are the QA questions of categories 1-4 that have evidence. A synthetic user talks about 5 of
the 12 topics of ``bench.common.topics``: one memory is one user turn (a fact or an episode
sentence), 50 turns per session, sessions spread over the last 180 days; their questions are
personal questions and keyword queries about those topics.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

from bench.common.topics import FACT_QUERIES, KEYWORD_QUERIES, TOPICS, fill

# the harness's own conversion, so the benchmark writes what the evaluation writes
from strata.eval.locomo import CATEGORIES, conversation_sessions, turn_text

__all__ = ["Question", "Session", "Turn", "UserData", "locomo_users", "question_mix",
           "synthetic_users"]

Source = Literal["locomo", "synthetic"]


@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    turn_id: str | None = None  # None: the service numbers the turn

    def body(self) -> dict[str, Any]:
        """The turn as the batch endpoint takes it (add ``user_id`` for the single one)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content,
                               "created_at": self.created_at.isoformat()}
        if self.metadata:
            out["metadata"] = self.metadata
        if self.turn_id:
            out["turn_id"] = self.turn_id
        return out


@dataclass(frozen=True)
class Session:
    session_id: str
    turns: list[Turn]


@dataclass
class UserData:
    user_id: str
    source: Source
    sessions: list[Session]
    questions: list[str]

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


@dataclass(frozen=True)
class Question:
    user_id: str
    query: str
    source: Source


def locomo_users(data_dir: Path, tag: str, limit: int | None = None) -> list[UserData]:
    """One user per conversation file (sorted; the first ``limit``)."""
    users = []
    for path in sorted(Path(data_dir).glob("*.json"))[:limit]:
        conv = json.loads(path.read_text())
        sessions = []
        for n, (when, turns) in enumerate(conversation_sessions(conv), start=1):
            sessions.append(Session(f"s{n}", [
                Turn("user", turn_text(t), when + timedelta(seconds=30 * (i - 1)),
                     {"speaker": t["speaker"]})  # the service numbers them s<n>:<i>
                for i, t in enumerate(turns, start=1)]))
        questions = [str(q["question"]) for q in conv.get("qa", [])
                     if q.get("category") in CATEGORIES and q.get("evidence")]
        users.append(UserData(f"locomo-{path.stem}-{tag}", "locomo", sessions, questions))
    return users


def synthetic_users(n_users: int, per_user: int, tag: str, seed: int,
                    session_turns: int = 50, fact_share: float = 0.6,
                    questions_per_user: int = 20) -> list[UserData]:
    """``n_users`` users with ``per_user`` distinct memory sentences each, as user turns."""
    rng = random.Random(seed)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    users = []
    for u in range(n_users):
        topics = rng.sample(TOPICS, 5)
        texts: list[str] = []
        seen: set[str] = set()
        while len(texts) < per_user:
            topic = rng.choice(topics)
            templates = topic.facts if rng.random() < fact_share else topic.episodes
            text = fill(rng.choice(templates), rng, topic)
            if text not in seen:
                seen.add(text)
                texts.append(text)
        n_sessions = -(-per_user // session_turns)
        sessions = []
        for k in range(n_sessions):
            start = now - timedelta(days=180 * (n_sessions - k) / n_sessions)
            chunk = texts[k * session_turns:(k + 1) * session_turns]
            sessions.append(Session(f"s{k + 1}", [
                Turn("user", text, start + timedelta(seconds=30 * i))
                for i, text in enumerate(chunk)]))
        questions = []
        for _ in range(questions_per_user):
            topic = rng.choice(topics)
            pool = FACT_QUERIES if rng.random() < 0.7 else KEYWORD_QUERIES
            q = fill(rng.choice(pool), rng, topic)
            questions.append(q[0].lower() + q[1:] if pool is FACT_QUERIES else q)
        users.append(UserData(f"synth-{u:03d}-{tag}", "synthetic", sessions, questions))
    return users


def question_mix(users: list[UserData], n: int, locomo_share: float,
                 seed: int) -> list[Question]:
    """``n`` questions: a ``locomo_share`` of them LoCoMo questions (cycling through all of
    them in a shuffled order), the rest a random synthetic user's question."""
    rng = random.Random(seed)
    locomo = [Question(u.user_id, q, "locomo") for u in users if u.source == "locomo"
              for q in u.questions]
    synthetic = [u for u in users if u.source == "synthetic" and u.questions]
    rng.shuffle(locomo)
    share = locomo_share if locomo and synthetic else (1.0 if locomo else 0.0)
    out: list[Question] = []
    next_locomo = 0
    for _ in range(n):
        if locomo and rng.random() < share:
            out.append(locomo[next_locomo % len(locomo)])
            next_locomo += 1
        elif synthetic:
            user = rng.choice(synthetic)
            out.append(Question(user.user_id, rng.choice(user.questions), "synthetic"))
    return out

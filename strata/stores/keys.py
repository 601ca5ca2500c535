"""The one codec of Strata's key strings: a user's scope key, a session's key, and the names
of the Redis keys built from them. Nothing else formats or parses these strings.

A scope key is ``<tenant>:<user>`` (``Scope.key``); a session key is
``<tenant>:<user>:<session>``. Identifiers never hold a ``:`` (``strata.models.check_id``),
so both parse back unambiguously.

Redis keys (each under the store's prefix, ``strata:`` by default)::

    wal:{session}            stream  the session's WAL
    turns:{session}          set     every turn id the session ever had
    wm:{session}             hash    working-memory snapshot {data, wal_id}
    active:{shard}           zset    live sessions of a shard by last activity
    archived                 zset    closed sessions by the time they were archived
    q:ltm:high|low           stream  long-term write queues
    job:{id}                 string  a queued job's status as JSON (ids and counts, no text)
    audit:{scope}            stream  content-free audit events
    recall-log               stream  recalled memory ids per scope (content-free)
    users                    set     scope keys of the users with long-term memory
    fu:{scope}:quiet         hash    follow-up topic -> quiet until (epoch seconds)
    fu:{scope}:outcomes      hash    "<kind>:<used|dismissed>" -> count
    fu:{session}:count       string  follow-ups proposed in the session
    forgets:{scope}          hash    the user's recent forget requests (turn + target -> request)
    deleted:{scope}          set     "<session>:<turn>" of the turns the user's deletes took
    entity-edits:{scope}     hash    the user's entity view edits (lane -> edits as JSON)
    hotsnap:{scope}          hash    the user's write generation g and hot snapshot key k
                                     (hex; strata.stores.hot_snapshot)
    rate:key:{digest}        hash    an API key's token bucket {tokens, at} (the key's digest)
    rate:tenant:{tenant}     hash    a tenant's token bucket {tokens, at}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from strata.errors import InvalidInput
from strata.models import Scope

__all__ = [
    "ARCHIVED",
    "QUEUE_HIGH",
    "QUEUE_LOW",
    "RECALL_LOG",
    "USERS",
    "SessionRef",
    "active",
    "audit",
    "deleted_turn",
    "deleted_turns",
    "due_member",
    "entity_edits",
    "followup_count",
    "followup_outcomes",
    "followup_quiet",
    "forgets",
    "forgets_due",
    "hot_snapshot",
    "job",
    "outcome_counts",
    "outcome_field",
    "parse_due_member",
    "parse_scope_key",
    "rate_bucket",
    "snapshot",
    "turn_ids",
    "user_keys",
    "user_members",
    "wal",
]

QUEUE_HIGH = "q:ltm:high"
QUEUE_LOW = "q:ltm:low"
ARCHIVED = "archived"
USERS = "users"
RECALL_LOG = "recall-log"


def parse_scope_key(key: str) -> Scope:
    """The scope of a ``<tenant>:<user>`` key (as stored: not re-validated, so the tenant's
    shared scope parses too)."""
    tenant, sep, user = key.partition(":")
    if not sep or not tenant or not user or ":" in user:
        raise InvalidInput(f"not a scope key: {key!r}")
    return Scope.model_construct(tenant=tenant, user=user)


@dataclass(frozen=True)
class SessionRef:
    """One session of one user: what a session's Redis keys are built from."""

    scope: Scope
    session_id: str

    @property
    def key(self) -> str:
        """``<tenant>:<user>:<session>``."""
        return f"{self.scope.key}:{self.session_id}"

    @classmethod
    def parse(cls, key: str) -> SessionRef:
        """The session a ``<tenant>:<user>:<session>`` key names."""
        scope_key, sep, session_id = key.rpartition(":")
        if not sep or not session_id:
            raise InvalidInput(f"not a session key: {key!r}")
        return cls(parse_scope_key(scope_key), session_id)

    def of(self, scope: Scope) -> bool:
        """Whether this is a session of ``scope``'s user."""
        return self.scope.key == scope.key


def wal(ref: SessionRef) -> str:
    return f"wal:{ref.key}"


def turn_ids(ref: SessionRef) -> str:
    return f"turns:{ref.key}"


def snapshot(ref: SessionRef) -> str:
    return f"wm:{ref.key}"


def user_keys(kind: str, scope: Scope) -> str:
    """The pattern matching every ``kind`` key under the user: the ``wal``, ``wm`` and
    ``turns`` keys of all the user's sessions, or all the user's ``fu`` (follow-up) keys."""
    return f"{kind}:{scope.key}:*"


def user_members(scope: Scope) -> str:
    """The pattern matching the user's sessions in a zset of session keys."""
    return f"{scope.key}:*"


def job(job_id: str) -> str:
    return f"job:{job_id}"


def forgets(scope: Scope) -> str:
    return f"forgets:{scope.key}"


def deleted_turns(scope: Scope) -> str:
    return f"deleted:{scope.key}"


def entity_edits(scope: Scope) -> str:
    return f"entity-edits:{scope.key}"


def hot_snapshot(scope_key: str) -> str:
    return f"hotsnap:{scope_key}"


def forgets_due(shard: int) -> str:
    """A shard's scheduled deletes of forgotten memories: a sorted set of
    ``<scope key>|<request key>`` by due time."""
    return f"forgets_due:{shard}"


def due_member(scope: Scope, request_key: str) -> str:
    return f"{scope.key}|{request_key}"


def parse_due_member(member: str) -> tuple[Scope, str]:
    scope, _, request = member.partition("|")
    return parse_scope_key(scope), request


def active(shard: int) -> str:
    return f"active:{shard}"


def audit(scope: Scope) -> str:
    return f"audit:{scope.key}"


def followup_quiet(scope: Scope) -> str:
    return f"fu:{scope.key}:quiet"


def followup_outcomes(scope: Scope) -> str:
    return f"fu:{scope.key}:outcomes"


def followup_count(ref: SessionRef) -> str:
    return f"fu:{ref.key}:count"


def rate_bucket(kind: str, name: str) -> str:
    """A token bucket of the rate limits: ``kind`` is ``key`` (``name`` a digest of the API
    key, never the key) or ``tenant``."""
    return f"rate:{kind}:{name}"


def deleted_turn(session_id: str, turn_id: str) -> str:
    """A member of the ``deleted:{scope}`` set: ``<session>:<turn>`` (a session id holds no
    ``:``, so the turn id may)."""
    return f"{session_id}:{turn_id}"


def outcome_field(kind: str, outcome: str) -> str:
    """A field of the ``fu:{scope}:outcomes`` hash: ``<kind>:<used|dismissed>``."""
    return f"{kind}:{outcome}"


def outcome_counts(fields: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """(used, dismissed) per kind, from the fields of a ``fu:{scope}:outcomes`` hash."""
    kinds: dict[str, list[int]] = {}
    for field, n in fields.items():
        kind, _, outcome = field.rpartition(":")
        kinds.setdefault(kind, [0, 0])[0 if outcome == "used" else 1] += int(n)
    return {k: (v[0], v[1]) for k, v in kinds.items()}

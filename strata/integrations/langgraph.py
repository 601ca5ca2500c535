"""LangGraph's ``BaseStore`` on Strata: a graph's long-term memory kept as Strata facts.

How LangGraph's items map onto Strata (the tenant is the API key's)::

    namespace ("ann", "prefs")  key "seat"  value {"seat": "window"}
        user      ann                                  (namespace[user_at], default 0)
        memory    a fact, key "seat"
                  value  '{"seat": "window"}'          (the value dict as JSON, round-trips)
                  text   'seat: window'                (what recall reads and embeds)
                  scope tag  'langgraph:prefs'         (the rest of the namespace)

- ``put`` creates the fact; a new value for the same namespace and key supersedes the
  current one through Strata's conflict rules, so history stays (``GET …/history``) and
  recall sees only the current value. Each put carries a ``session_id`` of its own
  (``langgraph-<uuid>``), so writing back an earlier value is a new version, not the
  duplicate of the old one.
- ``get`` finds the active fact with that key and namespace tag among the user's active facts.
- An item's times and ttl live in its fact's metadata, ``metadata["langgraph"]``::

      {"created_at": "...", "updated_at": "...", "ttl_minutes": 5.0, "expires_at": "..."}

  ``created_at`` is the first put's and stays through updates (a new fact version carries
  it over; only ``updated_at`` moves); the fact's own times move with Strata's bookkeeping
  (a reinforcement, a ttl refresh), so they are not the item's. Facts written before these
  stamps show their version's times.
- ``ttl`` (minutes, as LangGraph's ``PutOp.ttl``; ``TTLConfig.default_ttl`` when a put gives
  none) sets ``expires_at``: put time plus ttl, moved on by each ``get`` and ``search`` that
  returns the item when ``refresh_ttl`` (a metadata patch; ``list_namespaces`` reads
  refresh nothing). Strata itself has no expiry, so the store keeps it: an expired item is
  never returned (nor its namespace listed), and the read that finds it deletes its fact
  (there is no background sweep; an expired item nobody reads stays stored until then).
  The clock is the store's (``clock=``), not the server's.
- ``search`` lists those facts under the prefix and filters them; with a ``query`` it ranks
  them by Strata's recall (facts layer), whose scores become ``SearchItem.score``.
- ``delete`` deletes the fact with every version of it.
- ``list_namespaces`` reads the tenant's users (``GET /v1/users``) and their facts' tags.

Only facts written through a store (with a ``langgraph:`` tag) are items; the facts Strata
extracts from conversation are not, but recall returns both. A value is at most 2000
characters of JSON (a fact's value), and, like every long-term memory, one holding sensitive
data (a card, a password, a phone number) is refused. ``get`` and ``search`` read up to the
user's 1000 newest active facts.

The logic is written once as plans (generators that yield the SDK calls they need); the sync
methods run them on a ``strata.Client``, the async ones on a ``strata.AsyncClient``.

Why this module is long: it is the whole of one ``BaseStore`` — the namespace mapping, the
item stamps (times, ttl), LangGraph's filter and match rules, the five operations as plans
and the two runners — and each part is only read through the others; the filter helpers
could move out if another integration ever needs them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, Literal, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from strata import errors
from strata.client import AsyncClient, Client

__all__ = ["TAG_PREFIX", "NamespaceMap", "StrataStore"]

TAG_PREFIX = "langgraph:"
MAX_VALUE_CHARS = 2000  # a fact's value (strata.layers.memories.MemoryCreate)
MAX_TEXT_CHARS = 8000
FACT_LIMIT = 1000  # the memories list's largest page
USER_LIMIT = 10_000
RECALL_TOP_K = 100
STAMP = "langgraph"  # the fact metadata key of an item's times and ttl

T = TypeVar("T")


@dataclass(frozen=True)
class _Call:
    """One SDK call a plan needs: ``Client``/``AsyncClient`` method, arguments."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Plan = Generator[_Call, Any, T]


@dataclass(frozen=True)
class NamespaceMap:
    """Where the Strata user sits in a LangGraph namespace; the other labels are the path.

    ``NamespaceMap(user_at=0)``: ``("ann", "prefs")`` is user ``ann``, path ``("prefs",)``;
    ``NamespaceMap(user_at=1)``: ``("memories", "ann")`` is user ``ann``, path ``("memories",)``.
    """

    user_at: int = 0

    def split(self, namespace: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        if len(namespace) <= self.user_at:
            raise InvalidNamespaceError(
                f"namespace {namespace} has no user id at position {self.user_at}")
        return namespace[self.user_at], namespace[:self.user_at] + namespace[self.user_at + 1:]

    def join(self, user: str, path: tuple[str, ...]) -> tuple[str, ...]:
        return (*path[:self.user_at], user, *path[self.user_at:])

    def user_of_prefix(self, prefix: tuple[str, ...]) -> str | None:
        """The user a namespace prefix names, or None: the prefix spans users."""
        if len(prefix) > self.user_at and prefix[self.user_at] != "*":
            return prefix[self.user_at]
        return None

    @staticmethod
    def tag(path: tuple[str, ...]) -> str:
        return TAG_PREFIX + ".".join(path)  # LangGraph labels never hold a period

    @staticmethod
    def path_of(tag: str) -> tuple[str, ...]:
        rest = tag[len(TAG_PREFIX):]
        return tuple(rest.split(".")) if rest else ()


def _check_labels(op: Op) -> None:
    """LangGraph's label rule, which the tag relies on: non-empty strings without a period
    (checked here too, as ops given straight to ``batch`` skip ``BaseStore``'s check)."""
    if isinstance(op, (GetOp, PutOp)):
        labels: Iterable[Any] = op.namespace
    elif isinstance(op, SearchOp):
        labels = op.namespace_prefix
    else:
        labels = [label for c in op.match_conditions or () for label in c.path]
    for label in labels:
        if not isinstance(label, str) or not label or "." in label:
            raise InvalidNamespaceError(f"namespace label {label!r}: a non-empty string "
                                        "without '.' is needed")


def _store_tag(memory: Mapping[str, Any]) -> str | None:
    return next((t for t in memory.get("scope_tags", []) if t.startswith(TAG_PREFIX)), None)


def _timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class _Stamp:
    """An item's times and ttl, kept in its fact's ``metadata["langgraph"]``."""

    created_at: datetime
    updated_at: datetime
    ttl_minutes: float | None = None
    expires_at: datetime | None = None

    @classmethod
    def new(cls, created_at: datetime, now: datetime, ttl_minutes: float | None) -> _Stamp:
        return cls(created_at, now, ttl_minutes,
                   None if ttl_minutes is None else now + timedelta(minutes=ttl_minutes))

    @classmethod
    def of(cls, memory: Mapping[str, Any]) -> _Stamp:
        """The fact's stamp; a fact written without one has its version's times."""
        raw = (memory.get("metadata") or {}).get(STAMP)
        if not isinstance(raw, Mapping):
            return cls(_timestamp(memory["created_at"]), _timestamp(memory["updated_at"]))
        ttl, expires = raw.get("ttl_minutes"), raw.get("expires_at")
        return cls(_timestamp(raw["created_at"]), _timestamp(raw["updated_at"]),
                   None if ttl is None else float(ttl),
                   None if expires is None else _timestamp(expires))

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def refreshed(self, now: datetime) -> _Stamp:
        """The stamp after a read at ``now``: the same times, the expiry moved on."""
        if self.ttl_minutes is None:
            return self
        return _Stamp(self.created_at, self.updated_at, self.ttl_minutes,
                      now + timedelta(minutes=self.ttl_minutes))

    def metadata(self) -> dict[str, Any]:
        return {STAMP: {"created_at": self.created_at.isoformat(),
                        "updated_at": self.updated_at.isoformat(),
                        "ttl_minutes": self.ttl_minutes,
                        "expires_at": self.expires_at and self.expires_at.isoformat()}}


def _decode(memory: Mapping[str, Any]) -> dict[str, Any]:
    """The stored value dict; a value edited by hand into something else is kept as text."""
    raw = memory.get("value") or ""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    return value if isinstance(value, dict) else {"value": raw, "text": memory.get("text")}


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif value is not None:
        yield str(value)


def _field(value: Mapping[str, Any], path: str) -> Any:
    """A dotted field of the value (``"a.b"``; ``[*]``/``[0]`` parts read the whole list)."""
    current: Any = value
    for part in path.split("."):
        name = part.split("[", 1)[0]
        if not isinstance(current, Mapping) or name not in current:
            return None
        current = current[name]
    return current


def _wording(key: str, value: Mapping[str, Any], index: Literal[False] | list[str] | None,
             fields: list[str] | None) -> str:
    """The fact's text: its key and the indexed fields' words (what recall embeds)."""
    if index is False:
        return key
    chosen = index or fields
    parts = (list(_leaves([_field(value, f) for f in chosen])) if chosen
             else list(_leaves(value)))
    return f"{key}: {'; '.join(parts)}"[:MAX_TEXT_CHARS] if parts else key


def _compare(actual: Any, condition: Any) -> bool:
    """LangGraph's filter: equality, or a dict of ``$eq $ne $gt $gte $lt $lte``."""
    if not (isinstance(condition, dict) and condition
            and all(k.startswith("$") for k in condition)):
        return bool(actual == condition)
    tests: dict[str, Callable[[Any, Any], bool]] = {
        "$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b,
        "$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}
    for op, expected in condition.items():
        if op not in tests:
            raise ValueError(f"unsupported filter operator {op!r}; one of {sorted(tests)}")
        try:
            if not tests[op](actual, expected):
                return False
        except TypeError:  # None or another type than the bound: no match
            return False
    return True


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    return all(_compare(_field(value, k), c) for k, c in (flt or {}).items())


def _labels_match(labels: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    return len(labels) == len(pattern) and all(
        p in ("*", n) for n, p in zip(labels, pattern, strict=True))


def _namespace_matches(namespace: tuple[str, ...],
                       conditions: tuple[MatchCondition, ...] | None) -> bool:
    for condition in conditions or ():
        path = tuple(condition.path)
        if len(path) > len(namespace):
            return False
        part = namespace[:len(path)] if condition.match_type == "prefix" \
            else namespace[len(namespace) - len(path):]
        if not _labels_match(part, path):
            return False
    return True


class StrataStore(BaseStore):
    """LangGraph's ``BaseStore`` whose items are Strata facts (see the module docstring).

    ``client`` serves the sync methods (``graph.invoke``), ``aclient`` the async ones
    (``graph.ainvoke``); give one or both. ``namespaces`` says where the user id sits in a
    namespace; ``index_fields`` which value fields make a fact's searchable text (default:
    every string in the value), as ``put(..., index=[...])`` does per item. ``ttl`` is
    LangGraph's ``TTLConfig`` (``default_ttl``, ``refresh_on_read``); ``clock`` tells the
    time items expire by (UTC).
    """

    supports_ttl = True

    def __init__(self, client: Client | None = None, aclient: AsyncClient | None = None, *,
                 namespaces: NamespaceMap | None = None,
                 index_fields: list[str] | None = None, ttl: TTLConfig | None = None,
                 clock: Callable[[], datetime] = _utcnow) -> None:
        if client is None and aclient is None:
            raise ValueError("StrataStore needs a strata.Client, a strata.AsyncClient or both")
        self.client = client
        self.aclient = aclient
        self.namespaces = namespaces or NamespaceMap()
        self.index_fields = index_fields
        self.ttl_config = ttl
        self.clock = clock

    # -- BaseStore ---------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.client is None:
            raise RuntimeError("this StrataStore has no strata.Client: use the async methods "
                               "(graph.ainvoke) or pass client=")
        return [_run(self._plan(op), self.client) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.aclient is None:
            raise RuntimeError("this StrataStore has no strata.AsyncClient: use the sync "
                               "methods (graph.invoke) or pass aclient=")
        return [await _arun(self._plan(op), self.aclient) for op in ops]

    # -- plans -------------------------------------------------------------------------------
    def _plan(self, op: Op) -> Plan[Result]:
        _check_labels(op)
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    def _facts(self, user: str) -> Plan[list[dict[str, Any]]]:
        """The user's active facts written through a store and not expired; the expired
        ones are deleted."""
        answer = yield _Call("memories", (user,),
                             {"kind": "fact", "status": "active", "limit": FACT_LIMIT})
        facts = [m for m in answer["memories"] if _store_tag(m) is not None]
        now = self.clock()
        for memory in facts:
            if _Stamp.of(memory).expired(now):
                yield _Call("forget", (user, memory["id"]))
        return [m for m in facts if not _Stamp.of(m).expired(now)]

    def _find(self, namespace: tuple[str, ...], key: str) -> Plan[dict[str, Any] | None]:
        user, path = self.namespaces.split(namespace)
        tag = self.namespaces.tag(path)
        facts = yield from self._facts(user)
        found = [m for m in facts if m.get("key") == key and _store_tag(m) == tag]
        return max(found, key=lambda m: str(m["updated_at"])) if found else None

    def _refresh(self, user: str, memory: Mapping[str, Any]) -> Plan[None]:
        """Move on the expiry of an item just read, if it has a ttl."""
        stamp = _Stamp.of(memory)
        if stamp.ttl_minutes is not None:
            yield _Call("update_memory", (user, memory["id"]),
                        {"metadata": stamp.refreshed(self.clock()).metadata()})

    def _item(self, memory: Mapping[str, Any], user: str,
              score: float | None = None) -> SearchItem:
        path = self.namespaces.path_of(_store_tag(memory) or TAG_PREFIX)
        stamp = _Stamp.of(memory)
        return SearchItem(namespace=self.namespaces.join(user, path), key=memory["key"],
                          value=_decode(memory), created_at=stamp.created_at,
                          updated_at=stamp.updated_at, score=score)

    def _get(self, op: GetOp) -> Plan[Item | None]:
        memory = yield from self._find(op.namespace, op.key)
        if memory is None:
            return None
        user = self.namespaces.split(op.namespace)[0]
        if op.refresh_ttl:
            yield from self._refresh(user, memory)
        item = self._item(memory, user)
        return Item(namespace=item.namespace, key=item.key, value=item.value,
                    created_at=item.created_at, updated_at=item.updated_at)

    def _put(self, op: PutOp) -> Plan[None]:
        user, path = self.namespaces.split(op.namespace)
        current = yield from self._find(op.namespace, op.key)
        if op.value is None:
            if current is not None:
                yield _Call("forget", (user, current["id"]))
            return None
        encoded = json.dumps(dict(op.value), ensure_ascii=False, separators=(",", ":"))
        if len(encoded) > MAX_VALUE_CHARS:
            raise errors.InvalidInput(
                f"a store value is kept as a Strata fact's value: at most {MAX_VALUE_CHARS} "
                f"characters of JSON, got {len(encoded)}")
        now = self.clock()
        # an update keeps the item's created_at; only updated_at (and the expiry) move
        stamp = _Stamp.new(_Stamp.of(current).created_at if current else now, now, op.ttl)
        metadata = stamp.metadata()
        body = {"kind": "fact", "key": op.key, "value": encoded,
                "text": _wording(op.key, op.value, op.index, self.index_fields),
                "scope_tags": [self.namespaces.tag(path)], "metadata": metadata}
        answer = yield _Call("remember", (user,),
                             {**body, "session_id": f"langgraph-{uuid.uuid4().hex}"})
        written = answer["memory"]
        if written.get("value") != encoded:
            # Strata compares values without case: "X" after "x" only reinforced the old
            # fact, so the old one goes and the new value is written afresh
            yield _Call("forget", (user, written["id"]))
            yield _Call("remember", (user,),
                        {**body, "session_id": f"langgraph-{uuid.uuid4().hex}"})
        elif (written.get("metadata") or {}).get(STAMP) != metadata[STAMP]:
            # the same value again only reinforced the fact, which keeps its metadata
            yield _Call("update_memory", (user, written["id"]), {"metadata": metadata})
        return None

    def _users(self, prefix_user: str | None) -> Plan[list[str]]:
        if prefix_user is not None:
            return [prefix_user]
        answer = yield _Call("users", (), {"limit": USER_LIMIT})
        return list(answer["users"])

    def _search(self, op: SearchOp) -> Plan[list[SearchItem]]:
        prefix = op.namespace_prefix
        users = yield from self._users(self.namespaces.user_of_prefix(prefix))
        found: list[tuple[SearchItem, str, dict[str, Any]]] = []
        for user in users:
            facts = yield from self._facts(user)
            items = {m["id"]: (self._item(m, user), user, m) for m in facts}
            items = {i: it for i, it in items.items()
                     if it[0].namespace[:len(prefix)] == prefix
                     and _matches(it[0].value, op.filter)}
            if not items:
                continue
            if op.query is None:
                found.extend(items.values())
                continue
            answer = yield _Call("recall", (user, op.query),
                                 {"layers": ["facts"], "top_k": RECALL_TOP_K,
                                  "budget_tokens": 8000})
            for hit in answer["items"]:
                if hit["id"] in items:
                    items[hit["id"]][0].score = float(hit["score"])
                    found.append(items[hit["id"]])
        if op.query is None:
            found.sort(key=lambda it: it[0].updated_at, reverse=True)
        else:
            found.sort(key=lambda it: it[0].score or 0.0, reverse=True)
        page = found[op.offset:op.offset + op.limit]
        if op.refresh_ttl:
            for _, user, memory in page:
                yield from self._refresh(user, memory)
        return [item for item, _, _ in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[list[tuple[str, ...]]]:
        named = {self.namespaces.user_of_prefix(tuple(c.path)) for c in op.match_conditions or ()
                 if c.match_type == "prefix"} - {None}
        users = yield from self._users(next(iter(named)) if len(named) == 1 else None)
        found: set[tuple[str, ...]] = set()
        for user in users:
            facts = yield from self._facts(user)
            for memory in facts:
                namespace = self.namespaces.join(
                    user, self.namespaces.path_of(_store_tag(memory) or TAG_PREFIX))
                if _namespace_matches(namespace, op.match_conditions):
                    found.add(namespace[:op.max_depth] if op.max_depth else namespace)
        return sorted(found)[op.offset:op.offset + op.limit]


@dataclass(frozen=True)
class _Done(Generic[T]):
    value: T  # a plan's result, once it needs no more calls


def _step(plan: Plan[T], answer: Any) -> _Call | _Done[T]:
    """Give ``plan`` the last call's answer: its next call, or its result (``_run`` and
    ``_arun`` carry a plan out so with the sync and the async client)."""
    try:
        return plan.send(answer)
    except StopIteration as done:
        return _Done(done.value)


def _run(plan: Plan[T], client: Client) -> T:
    step = _step(plan, None)
    while isinstance(step, _Call):
        step = _step(plan, getattr(client, step.method)(*step.args, **step.kwargs))
    return step.value


async def _arun(plan: Plan[T], client: AsyncClient) -> T:
    step = _step(plan, None)
    while isinstance(step, _Call):
        step = _step(plan, await getattr(client, step.method)(*step.args, **step.kwargs))
    return step.value

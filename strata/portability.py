"""The export format of users' long-term memory: JSON Lines, one header then one memory a line.

::

    {"format": "strata.memories", "version": 1, "embed_model": "...", "exported_at": "...",
     "tenant": "acme", "users": ["ann"]}
    {"user_id": "ann", "id": "...", "kind": "fact", "text": "...", "key": "...", ...}
    {"user_id": "ann", "entity_edits": {"*": {"renamed": {...}, "deleted": [...]}, ...}}

Each memory line holds every field of ``strata.models.MemoryItem`` (every status: a fact's
superseded versions keep ``valid_to`` and ``superseded_by``) and the user it belongs to. No
vectors: the importer embeds the texts with its own model, which is also how memories move to
another embedding model. Ids are kept, so importing a file twice changes nothing the second
time. A user's entity view edits (``strata.entities.overlay``), if any, follow the user's
memories on one line, by lane (``*`` an admin's, ``~`` a key of no agent's, else the
agent's); an importer restores them. A file is parsed and checked whole (``parse_export``)
before anything is written; the first bad line is named in the ``InvalidInput``. Big exports
go in chunks of whole lines, each chunk with the header (``split_export``), under the
server's body limit.

A confidence is written as the shortest decimal that reads back as the same float32 (the
vector store keeps confidence as float32, so a stored 0.9 reads back as 0.8999999761581421
and is written ``0.9``); an import stores it as the very float32 it came from.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from strata.auth import Principal
from strata.entities.overlay import ADMIN_LANE, SHARED_LANE, EntityEdits
from strata.errors import Forbidden, InvalidInput
from strata.extract.pii import find_pii
from strata.layers.memory_models import check_fact_key, check_scope_tags
from strata.models import MemoryItem, check_id

__all__ = ["FORMAT", "MEDIA_TYPE", "VERSION", "EntityEditsLine", "ExportHeader", "ImportCounts",
           "MemoryLine", "ParsedExport", "by_user", "entity_edits_line", "export_lines",
           "float32_decimal", "header_line", "memory_lines", "parse_export", "split_export"]

FORMAT = "strata.memories"
VERSION = 1
MEDIA_TYPE = "application/x-ndjson"
MAX_TEXT = 8000  # the memories API's own limit on a memory's text


class ExportHeader(BaseModel):
    """The first line of an export."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["strata.memories"] = "strata.memories"
    version: Literal[1] = 1
    embed_model: str = Field(description="the exporter's model; the importer re-embeds")
    exported_at: datetime
    tenant: str
    users: list[str]


class MemoryLine(MemoryItem):
    """One memory of an export: a ``MemoryItem`` and its user. Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    text: str = Field(min_length=1, max_length=MAX_TEXT)

    @field_validator("id", "superseded_by", "user_id")
    @classmethod
    def _ids(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_id(str(info.field_name), value)

    _name = field_validator("key")(check_fact_key)
    _tags = field_validator("scope_tags")(check_scope_tags)

    def item(self) -> MemoryItem:
        return MemoryItem.model_validate(self.model_dump(exclude={"user_id"}))


class EntityEditsLine(BaseModel):
    """A user's entity view edits, by lane. Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    entity_edits: dict[str, EntityEdits]

    @field_validator("user_id")
    @classmethod
    def _user(cls, value: str) -> str:
        return check_id("user_id", value)

    @field_validator("entity_edits")
    @classmethod
    def _lanes(cls, value: dict[str, EntityEdits]) -> dict[str, EntityEdits]:
        for lane in value:
            if lane not in (ADMIN_LANE, SHARED_LANE):
                check_id("entity_edits lane (an agent)", lane)
        return value


class ImportCounts(BaseModel):
    """What an import did: new ids, ids whose stored memory differed, ids already identical."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0


class ParsedExport(BaseModel):
    """A checked export: its header and its memory lines with their line numbers."""

    header: ExportHeader
    lines: list[tuple[int, MemoryLine]]
    entity_edits: list[tuple[int, EntityEditsLine]] = Field(default_factory=list)

    def one_user(self) -> list[MemoryItem]:
        """The memories, all of one user (an import goes into one user, the path's)."""
        first: str | None = None
        numbered = [(n, line.user_id) for n, line in self.lines] + [
            (n, line.user_id) for n, line in self.entity_edits]
        for number, user_id in sorted(numbered):
            first = first or user_id
            if user_id != first:
                raise InvalidInput(f"line {number}: user {user_id!r} after {first!r}; a "
                                   "user import takes one user's lines (split a tenant export "
                                   "by user_id)")
        return [line.item() for _, line in self.lines]

    def edits_of_one_user(self) -> dict[str, EntityEdits]:
        """The entity view edits of the export's one user (``one_user`` checks the users),
        by lane; a later line's lane over an earlier's."""
        return {lane: edits for _, line in self.entity_edits
                for lane, edits in line.entity_edits.items()}

    def in_lane_of(self, principal: Principal) -> list[MemoryItem]:
        """``one_user``'s memories as ``principal`` may write them: an admin's as they are;
        any other key's attributed to the key's agent (or to none), whatever a line says —
        private or shared with named agents only when the key has an agent."""
        items = self.one_user()
        if principal.role == "admin":
            return items
        agent = principal.agent
        return [item.model_copy(update={
            "agent": agent,
            "visibility": item.visibility if agent else "shared",
            "shared_with": item.shared_with if agent and item.visibility == "agents" else []})
            for item in items]

    def require_may_write(self, principal: Principal) -> None:
        """The create route's rule for every line: an agent key imports no procedure and
        no memory whose source is admin."""
        for number, line in self.lines:
            try:
                principal.require_may_write(line.kind, line.source)
            except Forbidden as exc:
                raise Forbidden(f"line {number}: {exc.detail}") from None


def _json_line(model: BaseModel, **extra: Any) -> str:
    return json.dumps({**model.model_dump(mode="json"), **extra}, ensure_ascii=False) + "\n"


def header_line(header: ExportHeader) -> str:
    return _json_line(header)


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def float32_decimal(value: float) -> float:
    """The shortest decimal (at most 9 significant digits, float32's round-trip width) that
    is the same float32 as ``value``: 0.8999999761581421 → 0.9."""
    single = _float32(value)
    for digits in range(1, 9):
        short = float(f"{value:.{digits}g}")
        if _float32(short) == single:
            return short
    return float(f"{value:.9g}")


def memory_lines(user_id: str, items: Iterable[MemoryItem]) -> Iterator[str]:
    for item in items:
        short = item.model_copy(update={"confidence": float32_decimal(item.confidence)})
        yield _json_line(short, user_id=user_id)


def entity_edits_line(user_id: str, lanes: dict[str, EntityEdits]) -> str:
    """The line of a user's entity view edits ("" when there are none)."""
    if not lanes:
        return ""
    return _json_line(EntityEditsLine(user_id=user_id, entity_edits=lanes))


def export_lines(header: ExportHeader,
                 memories: Iterable[tuple[str, Iterable[MemoryItem]]]) -> Iterator[str]:
    """The export, line by line: the header, then each user's memories."""
    yield header_line(header)
    for user_id, items in memories:
        yield from memory_lines(user_id, items)


def _problem(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}"
                     for e in exc.errors()[:3])


def _secret(line: MemoryLine) -> str | None:
    """The field that holds sensitive data (the memories API's write check), if one does."""
    fields = {"text": line.text, "key": line.key, "value": line.value,
              **{f"scope_tags[{i}]": t for i, t in enumerate(line.scope_tags)}}
    return next((name for name, text in fields.items() if text and find_pii(text)), None)


def parse_export(body: bytes | str,
                 parse: Callable[[bytes], Any] = json.loads) -> ParsedExport:
    """Check a whole export; the first bad line raises ``InvalidInput`` naming it.

    ``parse`` reads one line's JSON (the HTTP API passes its strict parser). Blank lines
    are skipped; a line that holds sensitive data is refused like the memories API's write.
    """
    raw = body.encode("utf-8") if isinstance(body, str) else body
    header: ExportHeader | None = None
    lines: list[tuple[int, MemoryLine]] = []
    edits: list[tuple[int, EntityEditsLine]] = []
    seen: dict[tuple[str, str], int] = {}
    for number, text in enumerate(raw.split(b"\n"), start=1):
        if not text.strip():
            continue
        try:
            value = parse(text)
        except ValueError as exc:
            raise InvalidInput(f"line {number}: not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InvalidInput(f"line {number}: not a JSON object")
        try:
            if header is None:
                header = ExportHeader.model_validate(value)
                continue
            if "entity_edits" in value:
                edits.append((number, EntityEditsLine.model_validate(value)))
                continue
            line = MemoryLine.model_validate(value)
        except ValidationError as exc:
            what = ("the header" if header is None else "entity edits"
                    if "entity_edits" in value else "a memory")
            raise InvalidInput(f"line {number}: not {what}: {_problem(exc)}") from None
        if (field := _secret(line)) is not None:
            raise InvalidInput(f"line {number}: {field} contains sensitive data (ID, card, "
                               "password, key, phone or address), which Strata never stores "
                               "long-term")
        if (earlier := seen.setdefault((line.user_id, line.id), number)) != number:
            raise InvalidInput(f"line {number}: id {line.id!r} again (first on line {earlier})")
        lines.append((number, line))
    if header is None:
        raise InvalidInput(f"line 1: empty; an export starts with its header ({FORMAT!r})")
    return ParsedExport(header=header, lines=lines, entity_edits=edits)


def split_export(export: str, max_bytes: int) -> list[str]:
    """An export as chunks of whole lines of at most ``max_bytes`` (UTF-8) each, every chunk
    starting with the header, so each is a valid export of its own."""
    rows = [line for line in export.splitlines() if line.strip()]
    if not rows:
        return []
    header = rows[0] + "\n"
    chunks: list[str] = []
    current: list[str] = []
    size = len(header.encode("utf-8"))
    for row in rows[1:]:
        row_bytes = len(row.encode("utf-8")) + 1
        if len(header.encode("utf-8")) + row_bytes > max_bytes:
            raise ValueError(f"one line is {row_bytes} bytes, over the chunk size {max_bytes}")
        if current and size + row_bytes > max_bytes:
            chunks.append(header + "".join(current))
            current, size = [], len(header.encode("utf-8"))
        current.append(row + "\n")
        size += row_bytes
    chunks.append(header + "".join(current))
    return chunks


def by_user(export: str) -> dict[str, str]:
    """A tenant export as one export per user (each with the header), for user imports."""
    rows = [line for line in export.splitlines() if line.strip()]
    if not rows:
        return {}
    out: dict[str, list[str]] = {}
    for row in rows[1:]:
        out.setdefault(str(json.loads(row).get("user_id")), []).append(row)
    return {user: "\n".join([rows[0], *lines]) + "\n" for user, lines in out.items()}

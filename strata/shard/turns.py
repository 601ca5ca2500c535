"""What a session shard accepts: session ids, turns (role, size, client id), and whose
session it is. Every check raises ``InvalidInput`` (or ``Forbidden``) before anything is
written."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from strata.errors import Forbidden, InvalidInput
from strata.models import Role, check_id, check_name
from strata.shard.models import TurnIn

__all__ = ["check_agent", "generated_turn_id", "parse_batch_turn", "validate_session_id",
           "validate_turn"]


def validate_session_id(session_id: str) -> None:
    try:
        check_id("session_id", session_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def validate_turn(session_id: str, role: str, content: str, turn_id: str | None,
                  metadata: dict[str, Any] | None, max_bytes: int) -> Role:
    """The turn's role, once the session id, content, size and client id are valid."""
    validate_session_id(session_id)
    try:
        parsed = Role(role)
    except ValueError:
        raise InvalidInput(f"role must be one of {[r.value for r in Role]}; "
                           f"got {role!r}") from None
    if not content.strip():
        raise InvalidInput("content is empty")
    size = len(content.encode("utf-8"))
    if metadata:  # kept with the turn, so it counts toward the turn's size
        size += len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":"),
                               default=str).encode("utf-8"))
    if size > max_bytes:
        raise InvalidInput(f"content and metadata are {size} bytes; the limit is "
                           f"{max_bytes} (STRATA_MAX_TURN_BYTES)")
    if turn_id is not None:
        _validate_turn_id(session_id, turn_id)
    return parsed


def parse_batch_turn(session_id: str, index: int, raw: TurnIn | Mapping[str, Any],
                     max_bytes: int) -> tuple[Role, TurnIn]:
    """One turn of a batch, validated; a problem names the turn's place in the batch."""
    try:
        turn = raw if isinstance(raw, TurnIn) else TurnIn.model_validate(raw)
        return (validate_turn(session_id, turn.role, turn.content, turn.turn_id,
                              turn.metadata, max_bytes), turn)
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                            for e in exc.errors())
        raise InvalidInput(f"turn {index}: {problem}") from None
    except InvalidInput as exc:
        raise InvalidInput(f"turn {index}: {exc.detail}") from None


def check_agent(owner: str | None, caller: str | None, session_id: str) -> None:
    """A session of an agent is that agent's: another agent gets 403 (a caller that names
    no agent, "", too; None is an admin or an unbound key acting for the tenant)."""
    if owner is not None and caller is not None and caller != owner:
        raise Forbidden(f"session {session_id!r} belongs to another agent")


def generated_turn_id(session_id: str, number: int) -> str:
    """The id of a session's ``number``-th turn when the client sent none. Client ids may not
    start with ``<session_id>:``, so the two kinds of id never collide."""
    return f"{session_id}:{number}"


def _validate_turn_id(session_id: str, turn_id: str) -> None:
    try:
        check_name("turn_id", turn_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if turn_id.startswith(f"{session_id}:"):
        raise InvalidInput(f"turn_id may not start with {session_id + ':'!r}: ids of that form "
                           "are the ones Strata gives turns sent without a turn_id")

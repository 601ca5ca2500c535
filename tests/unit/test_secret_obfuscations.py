"""No write path stores a secret, however it is written (issue #41): zero-width characters
inside it, fullwidth letters and digits, spread out with spaces, a label in any case.

A property test (hypothesis) writes each obfuscated secret through every write path of a
shard — a turn (the WAL, the window, its snapshot), a turn's metadata, the task state, an
explicit memory, an import, closing the session — then reads back everything Redis and the
vector store hold: the secret's characters are nowhere. Ids and names that hold one are
refused; knowledge documents are masked or refused, as the setting says.
"""

from __future__ import annotations

import itertools
import json
import unicodedata
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.errors import InvalidInput
from strata.extract.pii import find_pii, normalised
from strata.layers.knowledge import DocumentIn
from strata.layers.knowledge_import import screened
from strata.layers.memory_models import MemoryCreate
from strata.models import (
    Collection,
    MemoryKind,
    RecordFilter,
    Scope,
    check_id,
    context_name,
)
from strata.portability import ExportHeader, header_line, parse_export
from strata.shard.service import SessionShardService
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

# (the secret as a label + value, the characters that must never be stored)
SECRETS = [
    ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("4111111111111111", "4111111111111111"),
    ("ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
    ("11010519491231002X", "11010519491231002X"),  # a resident ID with a valid checksum
]
HEADER = header_line(ExportHeader(embed_model="hash-64", exported_at="2026-01-01T00:00:00Z",
                                  tenant="t", users=[])).strip()
EXAMPLES = itertools.count()
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@st.composite
def obfuscated(draw: st.DrawFn) -> tuple[str, str]:
    """A secret written so that a plain pattern misses it, and its core characters."""
    secret, core = draw(st.sampled_from(SECRETS))
    how = draw(st.sampled_from(["zero-width", "fullwidth", "spaced", "grouped", "mixed"]))
    if how == "zero-width":
        cuts = sorted(draw(st.sets(st.integers(1, len(secret) - 1), min_size=1, max_size=4)))
        parts = [secret[a:b] for a, b in zip([0, *cuts], [*cuts, len(secret)], strict=True)]
        written = draw(st.sampled_from(ZERO_WIDTH)).join(parts)
    elif how == "fullwidth":
        written = fullwidth(secret)
    elif how == "spaced":
        written = " ".join(secret)
    elif how == "grouped":
        written = " ".join(secret[i:i + 4] for i in range(0, len(secret), 4))
    else:
        written = fullwidth(secret[:8]) + "\u200b" + secret[8:]
    lead = draw(st.sampled_from(["my key is", "card:", "here it is", "我的卡号是", "ID"]))
    return f"{lead} {written} thanks", core


def stored_text(redis: RedisStore, vectors: FakeVectorStore, scope: Scope) -> str:
    """Everything Redis holds under the test's prefix and every record of the scope, as
    text with each character NFKC-normalised and invisible ones dropped (so a secret
    stored fullwidth or split by a zero-width space is found too)."""
    client = redis.connection.client
    out: list[str] = []
    for key in client.scan_iter(match=redis.connection.key("*"), count=1000):
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        value: Any = {"string": client.get, "hash": client.hgetall, "set": client.smembers,
                      "zset": lambda k: client.zrange(k, 0, -1),
                      "list": lambda k: client.lrange(k, 0, -1),
                      "stream": client.xrange}[kind](key)
        out.append(repr(value))
    for collection in (Collection.FACTS, Collection.EPISODES, Collection.PROCEDURES):
        for record in vectors.query(collection, scope, RecordFilter(), 10_000):
            out.append(json.dumps({"text": record.text, **record.payload}, ensure_ascii=False))
    return _readable("\n".join(out))


def _readable(text: str) -> str:
    """Bytes reprs decoded, then normalised as ``find_pii`` reads text."""
    decoded = text.encode("latin-1", "backslashreplace").decode("unicode_escape", "ignore")
    decoded = decoded.encode("latin-1", "ignore").decode("utf-8", "ignore")
    return normalised(unicodedata.normalize("NFKC", decoded))[0].replace(" ", "")




@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=obfuscated())
def test_no_write_path_stores_an_obfuscated_secret(
        shard: SessionShardService, redis_store: RedisStore, vectors: FakeVectorStore,
        case: tuple[str, str]) -> None:
    text, core = case
    n = next(EXAMPLES)  # a user and a session of its own per example
    assert find_pii(text), text  # found as written
    scope = Scope(tenant="t", user=f"u{n}")
    session = f"s{n}"
    shard.append_turn(scope, session, "user", "hello")
    shard.append_turn(scope, session, "user", text, metadata={"note": text})
    shard.append_turn(scope, session, "user", f"Remember that {text}")
    shard.patch_task_state(scope, session, {"goal": text, "open_questions": [text]})
    view = shard.view(scope, session)
    with pytest.raises(InvalidInput):
        shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE, text=text))
    line = json.dumps({"id": f"m{n}", "kind": "episode", "text": text, "user_id": scope.user})
    with pytest.raises(InvalidInput):
        parse_export(f'{HEADER}\n{line}\n')
    shard.close(scope, session)
    shard.flush_snapshots()
    squeezed = core.replace(" ", "")
    assert squeezed not in _readable(view.model_dump_json())
    assert squeezed not in stored_text(redis_store, vectors, scope)


@pytest.mark.parametrize("case", SECRETS)
def test_an_id_or_a_name_that_holds_a_secret_is_refused(case: tuple[str, str]) -> None:
    secret = case[0]
    if not secret.isdigit() and not secret[:-1].isdigit():  # credentials: in any id or name
        with pytest.raises(ValueError, match="credential"):
            check_id("session_id", f"s-{secret}")
        with pytest.raises(ValueError, match="credential"):
            Scope(tenant="t", user=secret)
    with pytest.raises(ValueError, match="credential"):  # and numbers in a free-text name
        context_name(f"project {secret}")


def test_a_phone_number_or_a_random_id_is_still_an_id() -> None:
    for value in ("15551234567", "user+15551234567", "Kx8bQ2mZ9rT4vW1yN6pL3sD0fG7h", "user-42",
                  "ann@example.com", *(f"c-{uuid.uuid4().hex}" for _ in range(2000))):
        assert check_id("user_id", value) == value


def test_knowledge_documents_are_masked_or_refused() -> None:
    doc = DocumentIn(doc_id="ops/runbook", title="Runbook",
                     text="Call support at +1 555 123 4567. Deploy with "
                          "AKIA\u200bIOSFODNN7EXAMPLE set.", metadata={"owner": "ops"})
    masked = screened([doc], "mask")[0]
    assert "IOSF" not in masked.text and "[REDACTED:api_key]" in masked.text
    assert "555 123 4567" in masked.text  # a support line is what a document is for
    with pytest.raises(InvalidInput, match="ops/runbook"):
        screened([doc], "refuse")
    plain = DocumentIn(doc_id="faq", text="Refunds take 30 days.")
    assert screened([plain], "refuse") == [plain]

"""Sensitive data, quality and the three questions, each with a case that fails without it."""

from __future__ import annotations

import pytest

from strata.extract.base import Candidate
from strata.extract.filters import WriteFilter, quality_score, three_questions
from strata.extract.pii import find_pii, luhn_ok, redact, resident_id_ok
from strata.extract.rules import RuleExtractor
from strata.models import MemoryKind, Role, Turn


def test_checksums() -> None:
    assert resident_id_ok("11010519491231002X")
    assert not resident_id_ok("110105194912310021")  # wrong check digit
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")


@pytest.mark.parametrize(("text", "kind"), [
    ("我的身份证号是11010519491231002X", "resident_id"),
    ("card 4111 1111 1111 1111 please", "bank_card"),
    ("my password is hunter2", "secret"),
    ("我的密码是abc123456", "secret"),
    ("call me on 13812345678", "phone"),
    ("use sk-abcdefghijklmnopqrstuvwxyz123", "api_key"),
    ("I live at 221 Baker Street, Apt 4", "address"),
    ("我家在建国路88号3单元", "address"),
])
def test_sensitive_data_is_found_and_redacted(text: str, kind: str) -> None:
    assert [f.kind for f in find_pii(text)] == [kind]
    assert f"[REDACTED:{kind}]" in redact(text)


@pytest.mark.parametrize("text", [
    "I paid 4500 dollars on 2023-05-07", "order 1234567890123 shipped",
    "我的身份证号是110105194912310021",  # fails the checksum: not an ID number
])
def test_ordinary_numbers_are_kept(text: str) -> None:
    assert redact(text) == text


def _cands(text: str) -> list[Candidate]:
    return RuleExtractor().extract([Turn(turn_id="1", session_id="s", user_id="u",
                                         role=Role.USER, content=text)])


def test_filter_drops_sensitive_values_and_redacts_text() -> None:
    report = WriteFilter().apply(
        _cands("My name is Ann Lee. My password is hunter2 and my card is 4111111111111111."))
    texts = " ".join(c.text for c in report.kept)
    assert "hunter2" not in texts and "4111111111111111" not in texts
    assert any(c.key == "identity.name" for c in report.kept)


def test_quality_and_three_questions() -> None:
    chit = Candidate(kind=MemoryKind.EPISODE, text="ok thanks!", confidence=0.7)
    assert quality_score(chit) < 0.5
    assert WriteFilter().apply([chit]).kept == []
    today = Candidate(kind=MemoryKind.FACT, key="mood", value="tired",
                      text="I'm tired today", confidence=0.85)
    assert three_questions(today) == "does not stay true across sessions"
    general = Candidate(kind=MemoryKind.FACT, text="Paris is the capital of France")
    assert three_questions(general) == "not bound to this user"
    lasting = Candidate(kind=MemoryKind.FACT, key="constraint.allergy:peanuts",
                        value="allergic", text="I'm allergic to peanuts", confidence=0.85)
    assert three_questions(lasting) is None
    assert WriteFilter().apply([lasting]).kept == [lasting]


def test_a_question_states_no_fact() -> None:
    kinds = [c.kind for c in _cands("What's a favorite book you remember from childhood? "
                                     "I love hiking.")]
    facts = [c for c in _cands("What's a favorite book you remember from childhood? "
                               "I love hiking.") if c.kind is MemoryKind.FACT]
    assert [c.key for c in facts] == ["preference:hiking"] and MemoryKind.EPISODE in kinds

"""Fact categories and the Strata keys they are stored under (issue #36).

The corpus of facts worth keeping (``tests/data/facts``, ``strata/extract/fact_corpus``)
labels a turn's facts as (category, value) pairs; the rules name facts by key. Both
directions live here, so the learned reader (``fact_model``) stores what it finds under the
keys the rules use — a learned "Oakland" supersedes a ruled "SF" at ``location.home``.

Key → category (``category_of``):
  identity.name→name · identity.age→age · location.home→home · identity.origin→hometown ·
  work.* / identity.occupation→work · education.*→education · relationship.* / family.* /
  person.*→relationship · pet.*→pet · preference.*:X→like (value "dislikes X" / "不喜欢X" /
  "no longer likes X" → dislike) · favorite.*→like · constraint.no_recommend→dislike ·
  habit.*→habit · health.* / constraint.allergy→health · constraint.diet→diet ·
  language.*→language · possession.*→possession · goal.* / plan.*→goal ·
  anything else (note:, decision:, project.*) → its own name.
"""

from __future__ import annotations

import re

from strata.extract.fact_rules import key_part, preference_category
from strata.extract.life_rules import relation_of, species_of

__all__ = ["CATEGORIES", "category_of", "fact_key"]

CATEGORIES = ("name", "age", "home", "hometown", "work", "education", "relationship", "pet",
              "like", "dislike", "habit", "health", "diet", "language", "possession", "goal")
_PREFIX_CATEGORY = [
    ("identity.name", "name"), ("identity.age", "age"), ("location.home", "home"),
    ("identity.origin", "hometown"), ("identity.occupation", "work"), ("work.", "work"),
    ("education.", "education"), ("relationship.", "relationship"),
    ("family.", "relationship"), ("person.", "relationship"), ("pet.", "pet"),
    ("favorite.", "like"), ("constraint.no_recommend", "dislike"), ("habit.", "habit"),
    ("health.", "health"), ("constraint.allergy", "health"), ("constraint.diet", "diet"),
    ("language.", "language"), ("possession.", "possession"), ("goal", "goal"),
    ("plan.", "goal")]
_DISLIKE = re.compile(r"^(?:dislikes|no longer likes|doesn't like|does not like)\s+|"
                      r"^(?:不喜欢|不再喜欢|讨厌)", re.I)
_CJK = re.compile(r"[\u4e00-\u9fff]")
# an organisation names itself: a capitalised word, or a Chinese word for a place of work
_ORG = re.compile(r"(?-i:\b[A-Z][a-z][\w'&.-]*)|公司|医院|学校|银行|工厂|厂|店|局|所|"
                  r"集团|中心|大学|学院|餐厅|酒店")
_SCHOOL = re.compile(r"\b(?:university|college|school|academy|institute|u of)\b|大学|学院|"
                     r"学校|中学|小学", re.I)
_NAME = re.compile(r"(?-i:\b[A-Z][a-z]{1,15}\b)")


def category_of(key: str, value: str) -> str:
    """The corpus category of a Strata fact key (the table in the module docstring)."""
    if key.startswith("preference"):
        return "dislike" if _DISLIKE.search(value) else "like"
    for prefix, category in _PREFIX_CATEGORY:
        if key.startswith(prefix):
            return category
    return key.split(":")[0].split(".")[0] or "other"


def _named(value: str) -> str | None:
    """The capitalised name in a value that is no relation or species word ("sister Rosa",
    "beagle Biscuit")."""
    names = [n for n in _NAME.findall(value)
             if relation_of(n) is None and species_of(n) is None]
    return names[-1].lower() if names else None


def fact_key(category: str, value: str) -> tuple[str, str] | None:
    """The key (and the value to store) a fact of ``category`` is kept under, named as the
    rules name it: single-valued attributes share one key (``location.home``,
    ``work.employer``), people and pets are keyed by relation/species and name, likes by
    domain and object. None: nothing a key can be made from."""
    part = key_part(value)
    if not part:
        return None
    zh = bool(_CJK.search(value))
    fixed = {"name": "identity.name", "age": "identity.age", "home": "location.home",
             "hometown": "identity.origin", "diet": "constraint.diet"}
    if category in fixed:
        return fixed[category], value
    if category == "work":
        return ("work.employer" if _ORG.search(value) else "work.role"), value
    if category == "education":
        return ("education.school" if _SCHOOL.search(value) else "education.field"), value
    if category == "relationship":
        relation = relation_of(value)
        if relation is None:
            return f"relationship.{part[:30]}", value
        name = None if zh else _named(value)
        return f"relationship.{relation}{':' + name if name else ''}", value
    if category == "pet":
        species = species_of(value) or ("宠物" if zh else "pet")
        name = None if zh else _named(value)
        return f"pet.{species}{':' + name if name else ''}", value
    if category in ("like", "dislike"):
        domain = preference_category(value)
        key = f"preference{'.' + domain if domain else ''}:{part[:40]}"
        if category == "like":
            return key, value
        return key, (f"不喜欢{value}" if zh else f"dislikes {value}")
    if category == "goal":
        return f"goal:{part[:40]}", value
    if category in ("habit", "health", "language", "possession"):
        return f"{category}.{part[:40]}", value
    return None

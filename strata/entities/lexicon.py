"""Kinds of things: a violin is an instrument, a cobbler a dessert, Xenoblade a video game on
the Nintendo Switch, 小提琴 the violin. Read from the curated ``lexicon/categories.*.json``
(their ``source`` says where the words come from); categories form a small tree (a dessert
is a food, a martial art a sport) so a question asking for "food" reaches the desserts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

__all__ = ["CategoryLexicon", "Term", "default_lexicon"]

LEXICON_DIR = Path(__file__).with_name("lexicon")


@dataclass(frozen=True, slots=True)
class Term:
    """A lexicon entry: its canonical (English, lower-case) form, its categories, and its
    links to other entries (``platform``, ``same_as``)."""

    canonical: str
    categories: frozenset[str]
    links: tuple[tuple[str, str], ...] = ()


@dataclass
class CategoryLexicon:
    """English phrases (lower-case; a few proper names only as written, e.g. "Switch"),
    Chinese words mapped to their English entry, and the category tree."""

    terms: dict[str, Term]                      # lower-case English phrase → term
    cased: dict[str, Term]                      # phrases that count only as written
    zh: dict[str, Term]                         # Chinese word → term
    parents: dict[str, str | None]              # category → its parent category
    _pattern: re.Pattern[str] | None = field(default=None, repr=False)

    @classmethod
    def load(cls, directory: Path = LEXICON_DIR) -> CategoryLexicon:
        en = json.loads((directory / "categories.en.json").read_text(encoding="utf-8"))
        zh = json.loads((directory / "categories.zh.json").read_text(encoding="utf-8"))
        by_phrase: dict[str, set[str]] = {}
        cased_phrases: set[str] = set()
        parents: dict[str, str | None] = {}
        for category, body in en["categories"].items():
            parents[category] = body.get("parent")
            for phrase in body["terms"]:
                if phrase.startswith("="):
                    phrase = phrase[1:]
                    cased_phrases.add(phrase)
                by_phrase.setdefault(phrase.lower(), set()).add(category)
        for phrase, categories in zh.get("extra", {}).items():
            by_phrase.setdefault(phrase, set()).update(categories)
        links = {k: v for k, v in en.get("links", {}).items() if not k.startswith("_")}

        def term(phrase: str) -> Term:
            same = links.get(phrase, {}).get("same_as")
            canonical = same or phrase
            categories = by_phrase.get(phrase, set()) | by_phrase.get(canonical, set())
            linked = tuple(sorted((k, v) for k, v in links.get(phrase, {}).items()
                                  if k != "same_as"))
            return Term(canonical, frozenset(categories), linked)

        terms = {p: term(p) for p in by_phrase if p.lower() not in
                 {c.lower() for c in cased_phrases}}
        cased = {p: term(p.lower()) for p in cased_phrases}
        zh_terms = {word: term(target) for word, target in zh["terms"].items()
                    if target in by_phrase}
        return cls(terms=terms, cased=cased, zh=zh_terms, parents=parents)

    def ancestors(self, category: str) -> list[str]:
        """The category and every one above it ("dessert" → dessert, food)."""
        out: list[str] = []
        current: str | None = category
        while current and current not in out:
            out.append(current)
            current = self.parents.get(current)
        return out

    def descendants(self, category: str) -> set[str]:
        """The category and every one below it ("food" → food, dessert)."""
        return {c for c in self.parents if category in self.ancestors(c)} | {category}

    def find(self, text: str) -> Iterable[tuple[int, int, Term]]:
        """English lexicon phrases in ``text`` (longest first, a plural "-s"/"-es" too):
        (start, end, term)."""
        pattern = self._english_pattern()
        for match in pattern.finditer(text):
            phrase = match.group(0)
            found = self.cased.get(phrase) or next(
                (self.terms[f] for f in _singulars(phrase.lower()) if f in self.terms), None)
            if found is not None:
                yield match.start(), match.end(), found

    def _english_pattern(self) -> re.Pattern[str]:
        if self._pattern is None:
            phrases = sorted(set(self.terms) | set(self.cased), key=len, reverse=True)
            alternatives = "|".join(
                (re.escape(p) if p in self.cased else "(?i:" + re.escape(p) + ")")
                + ("" if p in self.cased else "(?i:e?s)?")
                for p in phrases)
            self._pattern = re.compile(rf"(?<![A-Za-z0-9_-])(?:{alternatives})(?![A-Za-z0-9_-])")
        return self._pattern


def _singulars(phrase: str) -> list[str]:
    """The phrase as written, then without a plural ending."""
    out = [phrase]
    if phrase.endswith("es"):
        out.append(phrase[:-2])
    if phrase.endswith("s"):
        out.append(phrase[:-1])
    return out


@cache
def default_lexicon() -> CategoryLexicon:
    """The packaged lexicon, read once per process."""
    return CategoryLexicon.load()

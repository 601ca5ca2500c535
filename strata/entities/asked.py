"""What a question asks the entity index for: the entities it names ("Florida", "Max",
"the Switch") and the kinds of thing it asks about ("what state" → places in a state,
"which instruments" → the instrument category, "What European countries" → countries in
Europe, "何种宠物" → pets), and the memories these reach (``reach``), each with why.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

from strata.entities.extract import continent_adjective, extract_entities
from strata.entities.index import EntityIndex
from strata.entities.models import EntityType

__all__ = ["SOURCES", "Asked", "Reach", "asked_for", "ranked", "reach", "source_of"]

# the index's sources, by the reasons ``reach`` gives: the gazetteer (a place, a place
# level), the category lexicon (a thing, a category) and the proper nouns (a name, a title,
# the people a question asks for)
SOURCES = ("gazetteer", "lexicon", "names")
_SOURCE_PREFIXES = {"gazetteer": ("entity:place:", "level:"),
                    "lexicon": ("entity:thing:", "category:"),
                    "names": ("entity:name:", "entity:title:", "entity:person:",
                              "entity:pet:", "entity:organisation:", "entity:event:",
                              "people:")}
_RRF_K = 60

# a word of the question → the categories it asks for
_ASKED_CATEGORIES: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(p, re.I), cats) for p, cats in [
        (r"\binstruments?\b|乐器", ("instrument",)),
        (r"\bpets?\b|\banimals?\b|宠物|动物", ("pet", "animal")),
        (r"\b(?:dogs?|puppies|puppy|cats?|kittens?)\b|狗|猫", ("pet", "animal")),
        (r"\bmartial arts?\b|武术", ("martial_art",)),
        (r"\bsports?\b|运动|体育", ("sport",)),
        (r"\bexercis\w*|\bworkouts?\b|\bwork out\b|\bfitness\b|健身|锻炼", ("exercise", "sport")),
        (r"\bactivit(?:y|ies)\b|\bhobb(?:y|ies)\b|\bpastimes?\b|\bfor fun\b|\bdestress\b|"
         r"\bde-stress\b|\bunwind\b|\brelax\b|\binterests?\b|\bpartake\b|爱好|活动|消遣",
         ("activity",)),
        (r"\bart\b|\bartwork\b|\bpaint(?:ed|s|ing)?\b|画", ("art",)),
        (r"\bfoods?\b|\bdish(?:es)?\b|\bmeals?\b|\bcook(?:ed|s|ing)?\b|\beat\b|\brecipes?\b|"
         r"食物|吃|菜|做饭", ("food",)),
        (r"\bdesserts?\b|\bsweets?\b|\bbak(?:e|ed|es|ing)\b|\btreats?\b|甜点|甜品|烘焙",
         ("dessert",)),
        (r"\bconsoles?\b|游戏机|主机", ("console",)),
        (r"\bgames?\b|\bgaming\b|游戏", ("game",)),
        (r"\bbooks?\b|\bread\b|\bnovels?\b|书|小说", ("book",)),
        (r"\bmusic\w*|\bsongs?\b|\bbands?\b|\bartists?\b|\bconcerts?\b|音乐|歌|乐队",
         ("music",)),
        (r"\bevents?\b|\bparticipat\w*|\battend\w*|活动", ("event",)),
        (r"\bholidays?\b|节日|节", ("holiday",)),
        (r"\bchildren\b|\bkids?\b|\bsons?\b|\bdaughters?\b|\bfamily\b|孩子|儿子|女儿|家人",
         ("family",)),
        (r"\bcars?\b|\bvehicles?\b|车", ("vehicle",)),
        (r"\bjobs?\b|\bcareers?\b|\bprofessions?\b|\bwork as\b|工作|职业", ("profession",)),
        (r"\bcamp(?:ed|ing)?\b|\bhik(?:e|ed|es|ing)\b|\boutdoors?\b|露营|徒步",
         ("nature_place",)),
        (r"\bwhere\b|\bplaces?\b|哪里|哪儿|在哪", ("venue", "nature_place")),
    ]]
_ASKED_LEVELS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(p, re.I), levels) for p, levels in [
        (r"\bstates?\b|州|省", ("state",)),
        (r"\bcountr(?:y|ies)\b|\babroad\b|国家", ("country",)),
        (r"\bcit(?:y|ies)\b|\btowns?\b|城市", ("city",)),
        (r"\bwhere\b|\bplaces?\b|\btravel\w*|\btrips?\b|\bvisit\w*|\bvacation\w*|哪里|哪儿|"
         r"去过|旅行|旅游", ("city", "state", "country")),
        (r"\bareas?\b|\bregions?\b", ("state", "city")),
    ]]


# a question that asks who / which people / what names: the people and pets the index knows
_ASKED_PEOPLE = re.compile(r"\bwho(?:m|se)?\b|\bpeople\b|\bpersons?\b|\bnames?\b|"
                           r"\bfriends?\b|谁|哪些人|名字|叫什么", re.I)
_PEOPLE_TYPES = (EntityType.PERSON, EntityType.PET, EntityType.NAME)


@dataclass
class Asked:
    """What a question asks for: entity ids, categories, place levels (and within which
    place), and the one speaker it names."""

    entities: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    levels: list[str] = field(default_factory=list)
    within: str | None = None
    speaker: str | None = None
    people: bool = False


@dataclass
class Reach:
    """The memories the index reaches from a question, each with the reasons it was reached
    (``entity:<id>``, ``category:<name>``, ``level:<level>``, ``people:<id>``)."""

    memories: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def ids(self, source: str | None = None) -> set[str]:
        """The memories reached (by one source: ``entity``, ``category`` or ``level``)."""
        if source is None:
            return set(self.memories)
        return {m for m, why in self.memories.items()
                if any(w.startswith(source + ":") for w in why)}


def asked_for(question: str, index: EntityIndex, lang: str = "en",
              speakers: Collection[str] = ()) -> Asked:
    """Parse a question into what it asks the index for."""
    asked = Asked()
    named = [s for s in speakers
             if re.search(rf"(?<!\w){re.escape(s)}(?!\w)", question, re.I)]
    asked.speaker = named[0] if len(named) == 1 else None
    found = extract_entities(question, lang, gazetteer=index.gazetteer,
                             lexicon=index.lexicon, speakers=speakers,
                             known=index.known_names())
    for entity in found:
        known = index.find(entity.id) or (index.find(entity.name)
                                          if entity.type is not EntityType.THING else None)
        if known is not None:
            asked.entities.append(known.id)
    for pattern, categories in _ASKED_CATEGORIES:
        if pattern.search(question):
            asked.categories.extend(c for c in categories if c not in asked.categories)
    for pattern, levels in _ASKED_LEVELS:
        if pattern.search(question):
            asked.levels.extend(v for v in levels if v not in asked.levels)
    asked.people = bool(_ASKED_PEOPLE.search(question))
    asked.within = continent_adjective(question)
    if asked.within and "country" not in asked.levels:
        asked.levels.append("country")
    return asked


def reach(index: EntityIndex, question: str, lang: str = "en",
          speakers: Collection[str] = (), *, by_speaker: bool = True,
          sources: Collection[str] = ("entity", "category", "level", "people")) -> Reach:
    """The memories the question reaches through the index. ``by_speaker``: a category or a
    place level reaches only the turns of the one person the question names (when it
    names one); the entities it names reach every turn naming them."""
    asked = asked_for(question, index, lang, speakers)
    out = Reach()
    if "entity" in sources:
        for entity in asked.entities:
            for memory in index.turns_of(entity):
                out.memories[memory].add(f"entity:{entity}")

    def typed(memories: set[str]) -> set[str]:
        if by_speaker and asked.speaker:
            return index.by_speaker(memories, asked.speaker)
        return memories

    if "category" in sources:
        for category in asked.categories:
            for memory in typed(index.turns_in_category(category)):
                out.memories[memory].add(f"category:{category}")
    if "people" in sources and asked.people:
        people = {s.lower() for s in speakers}
        for held in index.entities.values():
            if held.type in _PEOPLE_TYPES and held.name.lower() not in people:
                for memory in typed(index.mentions(held.id)):
                    out.memories[memory].add(f"people:{held.id}")
    if "level" in sources:
        for level in asked.levels:
            for memory in typed(index.turns_at_level(level, asked.within)):
                out.memories[memory].add(f"level:{level}")
    return out


def source_of(reason: str) -> str:
    """The source a reason of ``reach`` comes from (one of ``SOURCES``)."""
    for source, prefixes in _SOURCE_PREFIXES.items():
        if reason.startswith(prefixes):
            return source
    return "names"  # an entity of another type is a name the turns used


def ranked(reached: Reach, cosine: dict[str, float],
           sources: Collection[str] = SOURCES) -> list[str]:
    """The reached memories that ``cosine`` holds (their cosine to the query; a memory it
    lacks is not a candidate: gone, or not the caller's to see), best first by reciprocal
    rank fusion of their cosine and their reasons' specificity (the sum over its reasons
    of one over how many memories that reason reaches: a named entity of three turns
    outweighs the "activity" category of sixty) — the order chosen on the dev
    conversations (``bench/entity_ceiling.py``). Only the reasons of ``sources`` count."""
    why = {m: {r for r in reasons if source_of(r) in sources}
           for m, reasons in reached.memories.items() if m in cosine}
    why = {m: reasons for m, reasons in why.items() if reasons}
    size: dict[str, int] = defaultdict(int)
    for reasons in why.values():
        for reason in reasons:
            size[reason] += 1
    by_cosine = sorted(why, key=lambda m: (-cosine[m], m))
    rarity = {m: sum(1.0 / size[r] for r in reasons) for m, reasons in why.items()}
    by_rarity = sorted(by_cosine, key=lambda m: -rarity[m])  # ties keep the cosine order
    score: dict[str, float] = defaultdict(float)
    for order in (by_cosine, by_rarity):
        for rank, memory in enumerate(order):
            score[memory] += 1.0 / (_RRF_K + rank + 1)
    return sorted(by_cosine, key=lambda m: -score[m])

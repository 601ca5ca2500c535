"""The entities a turn mentions, deterministically: its proper nouns (capitalised spans that
do not merely start a sentence, quoted titles), places resolved by the gazetteer to the
places that contain them, things by the category lexicon (a "Switch" is a game console, a
"violin" an instrument), a pet or a relative the speaker names ("my dog Max", "my son
Kyle"); in Chinese, jieba's words matched against the same lexicon and the gazetteer's
Chinese names, and the names jieba tags as people, places and organisations.

Hard cases, each with a test: a capitalised word that only starts a sentence is no entity
unless it is a country, a state or a name the index already knows; a month or weekday is no
name ("in May") unless a relation names it ("my daughter May"); a city name that is also a
first name ("Austin", "Florence") is a place only after a place word ("in", "to", "visited")
or beside its state or country, and a capitalised "Turkey" is the country where "turkey" is
the food.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from strata.entities.gazetteer import CONTINENT_ADJECTIVES, Gazetteer, Place
from strata.entities.lexicon import CategoryLexicon, Term
from strata.entities.models import Entity, EntityType, Link, LinkKind, Mention, entity_id

__all__ = ["extract_entities", "extract_mentions", "place_entity", "thing_entity"]



def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_CAP_WORD = r"[A-Z][\w'’&-]*(?:\.[A-Z]\w*)*\.?"
_SPAN = re.compile(rf"(?<![A-Za-z0-9_'’]){_CAP_WORD}"
                   rf"(?:(?:\s+(?:of|the|de|da|del|la|and|&|von|van))*\s+{_CAP_WORD})*")
_QUOTED = re.compile(r"[\"“]([A-Z0-9][^\"”\n]{1,60}?)[\"”]")
_SENTENCE_START = re.compile(r"(?:^|[.!?…]\s+|\n\s*|[:;]\s+|[\"“(\[]\s*)$")
_PLACE_CUE = re.compile(  # "to" only after a word of going: "talked to Austin" is a person
    r"(?:\b(?:in|from|near|around|across|through|outside|downtown|visit(?:ed|ing|s)?|"
    r"explor(?:e|ed|ing)|tour(?:ed|ing)?|left|based in|lives? in|lived in)|"
    r"\b(?:go|goes|going|went|gone|move[sd]?|moving|flew|fly|flying|drove|drive|driving|trip|"
    r"travel\w*|head\w*|back|came|come|coming|vacation|relocat\w*|return\w*|way)\s+"
    r"(?:\w+\s+){0,2}?to)\s+(?:the\s+)?$", re.I)
_NOT_NAMES = _words("""i i'm i'll i've i'd i’m i’ll i’ve i’d ok okay hey hi hello wow oh ah thanks
    thank yeah yes no nope lol omg haha hmm um uh yay aw aww awesome sure well so
    and but or it it's it’s that's that’s what when where why how who which this
    that these those there here the a an my your our his her their we you he she
    they me us them god jesus mom dad mum mommy daddy grandma grandpa sir madam mr
    mrs ms dr tv ai diy lgbtq lgbt lgbtq+ btw fyi asap dm pm am p.s. ps let let's
    just also then now today tonight tomorrow yesterday last next maybe please
    sorry good great nice cool congrats congratulations anyway sounds looks glad
    happy love hope take check have had did do does been being very really totally
    definitely absolutely exactly agreed right true same yep yup nah hmmm honestly
    seriously thank-you cheers bye goodbye welcome not if as for with from by
    after before since while because although though once sometimes always never
    everyone everything someone something nothing anything all both each some any
    many much more most such other another one two three first second new old big
    little best better""")
_ABBREVIATIONS = _words("""dr. mr. mrs. ms. st. mt. jr. sr. u.s. u.k. d.c. u.s.a. l.a. n.y.
    prof. ft.""")
_MONTHS = _words("""january february march april may june july august september october november
    december""")
_WEEKDAYS = _words("""monday tuesday wednesday thursday friday saturday sunday""")
_ORG_WORDS = _words("""university college school academy church shelter inc inc. ltd llc
    company corp corporation club foundation center centre hospital association institute
    society council department museum library bank agency studio studios group
    team league network organization organisation charity""")
_RELATIONS = {  # a word before a name that says who the name is
    "family": "son daughter husband wife partner boyfriend girlfriend brother sister mom "
              "mother dad father grandma grandmother grandpa grandfather aunt uncle cousin "
              "niece nephew baby kid child fiance fiancé fiancee fiancée",
    "friend": "friend friends buddy pal bestie roommate neighbor neighbour coworker colleague "
              "boss mentor teacher coach therapist",
}
_RELATION_WORD = {w: kind for kind, words in _RELATIONS.items() for w in words.split()}
_PET_CUE = re.compile(
    r"\bmy\s+(?:\w+\s+)?(?P<animal>dog|puppy|pup|cat|kitten|kitty|turtle|tortoise|hamster|"
    r"rabbit|bunny|parrot|bird|fish|snake|lizard|gecko|horse|pony|ferret|pet|pets|"
    r"guinea pig|hedgehog)s?\s*,?\s*(?:(?:named|called)\s+)?$", re.I)
_PET_AFTER = re.compile(r"^\s*,?\s*(?:is\s+)?my\s+(?:\w+\s+)?(?P<animal>dog|puppy|cat|kitten|"
                        r"turtle|hamster|rabbit|bunny|parrot|bird|horse|pet)\b", re.I)
_RELATION_CUE = re.compile(r"\bmy\s+(?:\w+\s+)?(?P<word>[a-zé]+)\s*,?\s*(?:(?:named|called)\s+)?$",
                           re.I)
_SPEAKER = re.compile(r"^\s*([^:\n]{1,40}?)\s*[:：]\s*")
_ZH_PET = re.compile(r"(?P<animal>狗|狗狗|小狗|猫|猫咪|小猫|乌龟|兔子|仓鼠|鹦鹉)(?:叫做|名叫|叫)"
                     r"(?P<name>[\u4e00-\u9fffA-Za-z]{1,4}?)(?=[，。！？,.!?\s]|$|了|的)")


def extract_entities(text: str, lang: str = "en", *, gazetteer: Gazetteer,
                     lexicon: CategoryLexicon, speakers: Collection[str] = (),
                     speaker: str | None = None, known: Collection[str] = ()) -> list[Entity]:
    """The entities ``text`` mentions, each once, in the order first mentioned.

    ``speakers``: the conversation's people (their names are no entity of a turn: every
    turn starts with one); ``speaker``: who said this text (the owner of "my dog Max");
    ``known``: names the index already holds, which count even where they start a
    sentence."""
    seen: dict[str, Entity] = {}
    for mention in extract_mentions(text, lang, gazetteer=gazetteer, lexicon=lexicon,
                                    speakers=speakers, speaker=speaker, known=known):
        entity = mention.entity
        if entity.id in seen:
            seen[entity.id] = _merged(seen[entity.id], entity)
        else:
            seen[entity.id] = entity
    return list(seen.values())


def extract_mentions(text: str, lang: str = "en", *, gazetteer: Gazetteer,
                     lexicon: CategoryLexicon, speakers: Collection[str] = (),
                     speaker: str | None = None, known: Collection[str] = ()
                     ) -> list[Mention]:
    """Every entity mention of ``text`` with its span (``extract_entities`` merges them)."""
    if lang.startswith("zh") or _has_cjk(text):
        mentions = _chinese(text, gazetteer, lexicon, speakers, speaker)
        if not _latin_words(text):
            return mentions
    else:
        mentions = []
    return mentions + _english(text, gazetteer, lexicon, speakers, speaker, known)


# --- English ---------------------------------------------------------------------------

def _english(text: str, gazetteer: Gazetteer, lexicon: CategoryLexicon,
             speakers: Collection[str], speaker: str | None,
             known: Collection[str]) -> list[Mention]:
    body_start = 0
    prefix = _SPEAKER.match(text)
    if prefix and prefix.group(1).strip().lower() in {s.lower() for s in speakers}:
        body_start = prefix.end()
    people = {s.lower() for s in speakers}
    known_lower = {k.lower() for k in known}
    out: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for quoted in _QUOTED.finditer(text, body_start):
        title = quoted.group(1).strip(" ,.!?")
        if len(title.split()) <= 8:
            entity = Entity(id=entity_id("title", title), name=title, type=EntityType.TITLE)
            out.append(Mention(entity=entity, surface=title, start=quoted.start(1),
                               end=quoted.start(1) + len(title)))
            taken.append((quoted.start(), quoted.end()))
    for span in _SPAN.finditer(text, body_start):
        if any(a <= span.start() < b for a, b in taken):
            continue
        for start, surface in _trimmed(text, span.start(), span.group(0), body_start,
                                       gazetteer, lexicon, known_lower):
            if _is_speaker(surface, people):
                continue
            proper = _proper(text, start, surface, gazetteer, lexicon, speaker, known_lower)
            if proper is not None:
                out.append(Mention(entity=proper, surface=surface, start=start,
                                   end=start + len(surface)))
                taken.append((start, start + len(surface)))
    for start, end, term in lexicon.find(text[body_start:]):
        start, end = start + body_start, end + body_start
        if any(a <= start < b for a, b in taken):
            continue
        out.append(Mention(entity=thing_entity(term), surface=text[start:end], start=start,
                           end=end))
    return sorted(out, key=lambda m: m.start)


def _trimmed(text: str, start: int, surface: str, body_start: int, gazetteer: Gazetteer,
             lexicon: CategoryLexicon, known: Collection[str]
             ) -> Iterable[tuple[int, str]]:
    """The span without a possessive, without the words that only start a sentence, split
    where a word is no name ("Mom", "I")."""
    surface = re.sub(r"['’]s$", "", surface).rstrip(",")
    if surface.endswith(".") and surface.split()[-1].lower() not in _ABBREVIATIONS:
        surface = surface[:-1]
    words = [(m.start() + start, m.group(0)) for m in re.finditer(r"\S+", surface)]
    # "I" and the like split a span: "Yesterday I" → "Yesterday"
    groups: list[list[tuple[int, str]]] = [[]]
    for pos, word in words:
        if word.lower().strip(".,'’") in _NOT_NAMES and word not in {"The", "Of", "And"}:
            groups.append([])
        elif word.endswith(".") and word.lower() not in _ABBREVIATIONS:
            groups[-1].append((pos, word[:-1]))  # "Sweden. She": the sentence ends here
            groups.append([])
        else:
            groups[-1].append((pos, word.strip("'’")))
    for group in groups:
        while group and group[0][1].lower() in {"the", "of", "and", "&", "de", "la"}:
            group = group[1:]
        while group and group[-1][1].lower() in {"the", "of", "and", "&", "de", "la"}:
            group = group[:-1]
        if not group:
            continue
        first = group[0][0]
        at_start = first == body_start or bool(_SENTENCE_START.search(text[body_start:first]))
        if at_start:
            whole = text[first:group[-1][0] + len(group[-1][1])]
            if not _stands_at_start(whole, gazetteer, lexicon, known):
                group = group[1:]  # "Yesterday Nate …": the first word is the sentence's
                if not group:
                    continue
        phrase = text[group[0][0]:group[-1][0] + len(group[-1][1])]
        yield group[0][0], phrase


def _is_speaker(surface: str, people: Collection[str]) -> bool:
    """A speaker's name, possessive or nickname ("Mel" of Melanie)."""
    lower = re.sub(r"['’]s?$", "", surface.lower())
    return any(lower == p or (len(lower) >= 3 and p.startswith(lower)) for p in people)


def _stands_at_start(surface: str, gazetteer: Gazetteer, lexicon: CategoryLexicon,
                     known: Collection[str]) -> bool:
    """Whether a span that starts a sentence is an entity all the same: a name the index
    knows, a country / state / continent, a thing only its capital names ("Switch"), or a
    name of several words whose first is not a sentence word ("Tampa Bay", not "Yesterday
    Nate")."""
    lower = surface.lower()
    if lower in known or surface in lexicon.cased:
        return True
    if any(p.level != "city" for p in gazetteer.lookup(surface)):
        return True
    first = lower.split()[0]
    return " " in surface and first not in _NOT_NAMES and first not in _MONTHS \
        and first not in _WEEKDAYS and bool(gazetteer.lookup(surface) or
                                             first in known or lexicon.terms.get(lower))


def _proper(text: str, start: int, surface: str, gazetteer: Gazetteer,
            lexicon: CategoryLexicon, speaker: str | None,
            known: Collection[str]) -> Entity | None:
    lower = surface.lower()
    before = text[max(0, start - 40):start]
    after = text[start + len(surface):start + len(surface) + 40]
    pet = _PET_CUE.search(before) or _PET_AFTER.match(after)
    relation = _RELATION_CUE.search(before)
    relation_word = relation.group("word").lower() if relation else None
    if pet:
        return _named(surface, EntityType.PET, speaker,
                      [Link(kind=LinkKind.CATEGORY, target="pet"),
                       Link(kind=LinkKind.RELATION, target=pet.group("animal").lower())])
    if relation_word in _RELATION_WORD:
        kind = _RELATION_WORD[relation_word]
        return _named(surface, EntityType.PERSON, speaker,
                      [Link(kind=LinkKind.CATEGORY, target=kind),
                       Link(kind=LinkKind.RELATION, target=relation_word)])
    if lower in _MONTHS or lower in _WEEKDAYS or lower in _NOT_NAMES:
        return None
    if surface in lexicon.cased:
        return thing_entity(lexicon.cased[surface])
    places = gazetteer.lookup(surface)
    broad = [p for p in places if p.level != "city"]
    cued = bool(_PLACE_CUE.search(before)) or _beside_its_region(after, places, gazetteer)
    if broad and (cued or broad[0].level != "country" or lower not in _GIVEN_NAMES):
        return place_entity(broad[0], gazetteer)
    if places and (cued or (places[0].population >= 1_000_000 and lower not in known)):
        return place_entity(_best_city(places, after, gazetteer), gazetteer)
    term = lexicon.terms.get(lower)
    if term is not None:
        return thing_entity(term)
    words = set(lower.replace(".", " ").split())
    if words & _ORG_WORDS:
        return Entity(id=entity_id("name", surface), name=surface,
                      type=EntityType.ORGANISATION)
    return Entity(id=entity_id("name", surface), name=surface, type=EntityType.NAME)


# countries that are also first names: a place only after a place word
_GIVEN_NAMES = frozenset({"jordan", "chad", "georgia", "israel", "india", "kenya", "china"})


def _beside_its_region(after: str, places: list[Place], gazetteer: Gazetteer) -> bool:
    """"Tampa, Florida" / "Paris, France": the span is followed by a place containing it."""
    match = re.match(r"\s*,\s*([A-Z][\w.]*(?:\s+[A-Z][\w.]*)?)", after)
    if not match:
        return False
    regions = {p.id for p in gazetteer.lookup(match.group(1))}
    return any(regions & {c.id for c in gazetteer.chain(p.id)[1:]} for p in places)


def _best_city(places: list[Place], after: str, gazetteer: Gazetteer) -> Place:
    match = re.match(r"\s*,\s*([A-Z][\w.]*(?:\s+[A-Z][\w.]*)?)", after)
    if match:
        regions = {p.id for p in gazetteer.lookup(match.group(1))}
        for place in places:
            if regions & {c.id for c in gazetteer.chain(place.id)[1:]}:
                return place
    return places[0]


def _named(surface: str, kind: EntityType, owner: str | None, links: list[Link]) -> Entity:
    if owner:
        links = [*links, Link(kind=LinkKind.OWNER, target=entity_id("name", owner))]
    return Entity(id=entity_id("name", surface), name=surface, type=kind, links=links)


def place_entity(place: Place, gazetteer: Gazetteer) -> Entity:
    """A gazetteer place as an entity, linked to the place containing it."""
    links = [Link(kind=LinkKind.IN_PLACE, target=place.parent)] if place.parent else []
    return Entity(id=place.id, name=place.name, type=EntityType.PLACE, links=links,
                  place_level=place.level, aliases=list(place.zh_names[:3]))


def thing_entity(term: Term) -> Entity:
    """A lexicon term as an entity, linked to its categories and the things it is on."""
    links = [Link(kind=LinkKind.CATEGORY, target=c) for c in sorted(term.categories)]
    for kind, target in term.links:
        if kind == "platform":
            links.append(Link(kind=LinkKind.PLATFORM, target=entity_id("thing", target)))
    kind = EntityType.EVENT if term.categories & {"event", "holiday"} else EntityType.THING
    return Entity(id=entity_id("thing", term.canonical), name=term.canonical, type=kind,
                  links=links)


def _merged(a: Entity, b: Entity) -> Entity:
    """One entity read twice: the more specific type (a pet over a bare name), every link."""
    kind = a.type if a.type is not EntityType.NAME else b.type
    links = list(dict.fromkeys([*a.links, *b.links]))
    aliases = list(dict.fromkeys([*a.aliases, *b.aliases]))
    return a.model_copy(update={"type": kind, "links": links, "aliases": aliases})


# --- Chinese ---------------------------------------------------------------------------

def _chinese(text: str, gazetteer: Gazetteer, lexicon: CategoryLexicon,
             speakers: Collection[str], speaker: str | None) -> list[Mention]:
    import jieba.posseg as posseg

    people = set(speakers)
    out: list[Mention] = []
    pets: dict[int, str] = {}
    for match in _ZH_PET.finditer(text):
        name = match.group("name")
        pets[match.start("name")] = name
        entity = _named(name, EntityType.PET, speaker,
                        [Link(kind=LinkKind.CATEGORY, target="pet"),
                         Link(kind=LinkKind.RELATION,
                              target=lexicon.zh[match.group("animal")].canonical)])
        out.append(Mention(entity=entity, surface=name, start=match.start("name"),
                           end=match.end("name")))
    pairs = [(p.word, p.flag) for p in posseg.lcut(text)]
    positions = []
    at = 0
    for word, _ in pairs:
        at = text.find(word, at)
        positions.append(at)
        at += len(word)
    i = 0
    while i < len(pairs):
        found = None
        for width in (3, 2, 1):  # the longest run of words the lexicon or gazetteer knows
            if i + width > len(pairs):
                continue
            phrase = "".join(w for w, _ in pairs[i:i + width])
            read = _chinese_phrase(phrase, pairs[i][1] if width == 1 else "", gazetteer,
                                   lexicon)
            if read is not None:
                found = (width, phrase, read)
                break
        if found is None:
            word, flag = pairs[i]
            if positions[i] not in pets and word not in people and len(word) >= 2:
                if flag == "nr":
                    found = (1, word, Entity(id=entity_id("name", word), name=word,
                                             type=EntityType.PERSON))
                elif flag == "nt":
                    found = (1, word, Entity(id=entity_id("name", word), name=word,
                                             type=EntityType.ORGANISATION))
        if found is None:
            i += 1
            continue
        width, phrase, entity = found
        out.append(Mention(entity=entity, surface=phrase, start=positions[i],
                           end=positions[i] + len(phrase)))
        i += width
    return sorted(out, key=lambda m: m.start)


def _chinese_phrase(phrase: str, flag: str, gazetteer: Gazetteer,
                    lexicon: CategoryLexicon) -> Entity | None:
    places = gazetteer.lookup(phrase) if len(phrase) >= 2 else []
    if places:
        return place_entity(places[0], gazetteer)
    term = lexicon.zh.get(phrase)
    if term is not None and (len(phrase) >= 2 or flag.startswith("n")):
        return thing_entity(term)
    return None


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _latin_words(text: str) -> bool:
    return bool(re.search(r"[A-Za-z]{2,}", text))


def continent_adjective(text: str) -> str | None:
    """"European" → the continent's id (a question's "What European countries …")."""
    for adjective, code in CONTINENT_ADJECTIVES.items():
        if re.search(rf"\b{adjective}\b", text, re.I):
            return f"place:continent:{code}"
    return None

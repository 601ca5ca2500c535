"""The rule-based extractor (Chinese and English): facts, intents and episodes from user turns.

Only what the *user* says becomes a candidate; assistant turns are context, never facts.
Hedged statements ("maybe", "可能", "打算") get a low confidence, so the ConflictResolver
parks them in the observation area until they are confirmed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

from strata.extract.base import Candidate, Intent
from strata.extract.fact_rules import key_part, match_facts
from strata.extract.intents import (
    detect_intent,
    find_forget,
    has_override,
    has_remember,
    is_acknowledgement,
    is_hedged,
    is_question,
    is_reminder,
    stated_part,
    strip_request,
    unhedged,
)
from strata.extract.life_rules import speakers_part
from strata.extract.pii import redact
from strata.extract.timephrases import find_time_phrase
from strata.layers.summarize import split_sentences
from strata.models import MemoryKind, Provenance, Role, Source, Turn
from strata.tokens import count_tokens

__all__ = ["ConfirmReader", "FactReader", "ForgetReader", "RuleExtractor", "detect_intent", "is_acknowledgement",
           "is_hedged", "speaker_of", "speaker_prefix", "spoken_by", "stated_text"]

MIN_EPISODE_TOKENS = 6
_CLAUSE = re.compile(r"[，,；;]\s*|\s+(?:and|but)\s+(?=i\b|i'|my\b|we\b)", re.I)
_TEMPORARY = re.compile(r"\b(today|tonight|right now|at the moment|this time|for now)\b|"
                        r"今天|今晚|这次|暂时|这会儿|此刻", re.I)  # "我现在住在…" is lasting
_PROJECT_TAG = re.compile(r"\b(?:in|for|on) (?:the )?project ([A-Z][\w-]+)|在([\w\u4e00-\u9fff]{1,12}?)项目",
                          re.I)
_EPISODE_TYPES = [
    ("issue", re.compile(r"\b(bug|crash|error|lag|laggy|slow|broken|fail|problem|issue|complain)"
                         r"|卡顿|卡|慢|报错|崩溃|故障|问题|投诉", re.I)),
    ("purchase", re.compile(r"\b(bought|buy|order|ordered|purchase|paid|refund)\b|买了|下单|订单|付款|退款",
                            re.I)),
    ("plan", re.compile(r"\b(plan|planning|going to|will|next week|tomorrow)\b|计划|打算|明天|下周",
                        re.I)),
]
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|my|me|mine|we|our|us)\b|我|咱", re.I)
# someone else's words ("he said 'I'm not a dog person'") state nothing of the speaker's
_QUOTED = re.compile(r"(?:said|says|say|told me|tells me|asked|asks|goes|went|was like|wrote|"
                     r"说|讲|问|写着?)\s*[,:：]?\s*(?:\"[^\"]{1,200}\"|“[^”]{1,200}”|「[^」]{1,200}」)",
                     re.I)
_HYPOTHETICAL = re.compile(r"\b(?:if (?:i|we|only)|what if|i wish|wish i|imagine|in another life|"
                           r"i(?:'d| would) (?:be|have|live|move|buy|quit|become|probably|"
                           r"totally|definitely))\b|要是|如果|假如|假设|的话|想象一下|但愿", re.I)
# a request to be reminded states nothing of the speaker ("remind me to buy nappies", "提醒我
#周末去买纸尿裤"): neither a habit nor a goal
_REMINDER = re.compile(r"\b(?:remind (?:me|us)|set (?:a |an )?reminder|reminder (?:to|for))\b|"
                       r"提醒(?:我|自己|一下)|设个?提醒|定个闹钟", re.I)
# a liking said with an eye-roll is its opposite ("I just LOVE being on hold 🙄")
_SARCASM = re.compile(r"[\U0001F644\U0001F643]|\b(?:yeah right|/s)\b|\bjust (?-i:LOVE)\b|"
                      r"(?:太快乐了|真是太好了|可真行)", re.I)
_OBJECT = re.compile(r"(?:order|ticket|invoice|case|订单|工单|发票)\s*(?:号|number|no\.?|#)?\s*[:：#]?\s*"
                     r"([A-Za-z0-9-]{3,24})|#(\d{3,12})\b", re.I)
_NEG = re.compile(r"\b(hate|angry|annoyed|frustrat\w*|terrible|awful|bad|sad|upset|worst)\b|"
                  r"生气|烦|糟糕|难过|失望|差", re.I)
_POS = re.compile(r"\b(love|great|happy|glad|excited|awesome|amazing|thanks|good)\b|"
                  r"开心|高兴|喜欢|满意|感谢|太好了", re.I)


def _tags(sentence: str) -> list[str]:
    match = _PROJECT_TAG.search(sentence)
    if not match:
        return []
    return [f"project:{key_part(match.group(1) or match.group(2))}"]


def _clause(sentence: str, value: str) -> str:
    """The clause of a sentence that states ``value``: when one sentence states several facts
    ("我住在北京，在一家…公司上班"), each fact's text is its own clause, so a fact about work
    does not carry the old city's words into a recall about where the user lives."""
    clauses = [c.strip() for c in _CLAUSE.split(sentence) if c.strip()]
    return next((c for c in clauses if value and value in c), sentence.strip())


def speaker_of(turn: Turn) -> str | None:
    """The person who said a turn in a multi-party conversation (``metadata.speaker``)."""
    speaker = turn.metadata.get("speaker")
    if not isinstance(speaker, str):
        return None
    return speaker.strip()[:80] or None


def speaker_prefix(text: str, speaker: str) -> re.Match[str] | None:
    """The "Melanie: " a text starts with, naming ``speaker`` (case aside)."""
    return re.match(rf"\s*{re.escape(speaker)}\s*[:：]\s*", text, re.IGNORECASE)


def spoken_by(cand: Candidate, speaker: str | None) -> Candidate:
    """A fact as one person of a multi-party conversation stated it: it is theirs (their
    ``speaker``; a ``speaker:`` scope tag, so it conflicts only with what the same person
    said — Caroline moving to Boston does not supersede Melanie's Ohio), and its text loses
    the "Melanie: " the turn may start with (the context shows who said it)."""
    if not speaker:
        return cand
    text = cand.text
    prefix = speaker_prefix(text, speaker)
    if prefix and text[prefix.end():].strip():
        text = text[prefix.end():]
    tag = f"speaker:{key_part(speaker)}"
    tags = cand.scope_tags if tag in cand.scope_tags else [*cand.scope_tags, tag]
    return cand.model_copy(update={"speaker": speaker, "text": text, "scope_tags": tags})


def _fact_intent(turn_intent: Intent, sentence: str, change: bool) -> Intent:
    """A stated change overrides; an explicit request remembers; otherwise nothing."""
    if change or turn_intent in (Intent.OVERRIDE, Intent.FORGET) or has_override(sentence):
        return Intent.OVERRIDE
    if turn_intent is Intent.REMEMBER or has_remember(sentence):
        return Intent.REMEMBER
    return Intent.NONE


def _without_overridden(candidates: list[Candidate]) -> list[Candidate]:
    """Drop a value that a later turn of the same batch overrides ("我住在北京" … "我搬到上海了").

    The override was already applied at turn time; replaying the older value at session end
    would make it the newest version again.
    """
    def slot(cand: Candidate) -> tuple[str, tuple[str, ...]]:
        return cand.key or "", tuple(sorted(cand.scope_tags))

    last = {slot(c): i for i, c in enumerate(candidates) if c.key and c.intent is Intent.OVERRIDE}
    return [c for i, c in enumerate(candidates)
            if not (c.key and i < last.get(slot(c), -1)
                    and c.value != candidates[last[slot(c)]].value)]


ConfirmReader = Callable[[str, str | None], bool]
"""Whether a user turn confirms the user's turn before it."""

ForgetReader = Callable[[str, str | None], bool]
"""Whether a user turn the rules read as a forget is one (its text, the user's turn before)."""


class FactReader(Protocol):
    """A second reading of a turn's facts (``strata.extract.fact_model``): given what the
    turn states (``stated_text``) and the (key, value) facts the rules found in it, the facts
    to add and the keys of the rules' facts to drop."""

    def read(self, stated: str, ruled: Sequence[tuple[str, str]]
             ) -> tuple[list[tuple[str, str]], frozenset[str]]: ...


def stated_text(text: str) -> str:
    """What a turn states of its speaker, as the rules read it: its sentences without
    questions, hypotheticals, reminder requests, forget requests or quoted words, tag questions taken off, and
    a clause about someone else cut to who it is about (``speakers_part``)."""
    kept = []
    for sentence in split_sentences(text):
        sentence = speakers_part(_QUOTED.sub(" ", stated_part(sentence))).strip()
        if (not sentence or is_question(sentence) or _HYPOTHETICAL.search(sentence)
                or _REMINDER.search(sentence) or find_forget(sentence) is not None):
            continue
        kept.append(sentence)
    return " ".join(kept)


class RuleExtractor:
    """Deterministic, offline extraction of facts, intents and episodes. ``reads_confirm``
    (``strata.extract.intent_model.confirm_reader``): whether a turn after the user's hedged
    statement confirms it ("I might move to Berlin" … "yes, it's settled"); a confirmation
    states the hedged facts as said, which promotes their observation. ``reads_forget``
    (``intent_model.forget_reader``): the detector's second opinion on a turn the rules read
    as a forget; one it rejects is read as an ordinary turn (the turn path decides the same
    way, so a forget it declined is not applied at the session's end)."""

    def __init__(self, reads_confirm: ConfirmReader | None = None,
                 reads_facts: FactReader | None = None,
                 reads_forget: ForgetReader | None = None) -> None:
        self._reads_confirm = reads_confirm
        self._reads_facts = reads_facts
        self._reads_forget = reads_forget

    def extract(self, turns: Sequence[Turn], previous: str | None = None) -> list[Candidate]:
        """Candidates of the user turns; ``previous``: the user's turn before the first one
        (what a bare "that's no longer relevant" in it refers to)."""
        out: list[Candidate] = []
        said_by: str | None = None  # who said ``previous`` (the caller's: not known)
        for turn in turns:
            if turn.role is not Role.USER:
                continue  # the assistant's words and guesses are never user facts
            # one person confirms only what that person said (a conversation of several)
            own = previous if speaker_of(turn) == said_by else None
            out.extend(self._from_turn(turn, previous, own))
            previous, said_by = turn.content, speaker_of(turn)
        return _without_overridden(out)

    def _from_turn(self, turn: Turn, previous: str | None = None,
                   own_previous: str | None = None) -> list[Candidate]:
        provenance = Provenance(session_id=turn.session_id, turn_ids=[turn.turn_id])
        intent = detect_intent(turn.content)
        if (intent is Intent.FORGET and self._reads_forget is not None
                and not self._reads_forget(turn.content, previous)):
            intent = Intent.NONE
        out: list[Candidate] = []
        if intent is Intent.FORGET:
            phrase = find_forget(turn.content)
            target = (phrase.target if phrase else None) or previous
            if target:
                out.append(Candidate(kind=MemoryKind.FACT, text=target.strip(),
                                     intent=Intent.FORGET, provenance=provenance,
                                     event_time=turn.created_at, speaker=speaker_of(turn)))
        sarcastic = bool(_SARCASM.search(turn.content))
        for sentence in split_sentences(turn.content):
            sentence = _QUOTED.sub(" ", stated_part(sentence))
            if is_question(sentence) or _REMINDER.search(sentence):
                continue  # a question states nothing ("what's a book you remember?")
            if intent is Intent.FORGET and find_forget(sentence) is not None:
                continue  # "forget that I live in Boston" states nothing either
            out.extend(c for c in self._facts(sentence, intent, provenance, turn)
                       if not (sarcastic and (c.key or "").startswith(("preference", "favorite"))
                               and not re.match(r"dislikes|no longer|不喜欢|不再", c.value or "")))
        if self._reads_facts is not None and intent is not Intent.FORGET:
            out = self._read_facts(turn, out, intent, provenance, sarcastic)
        out.extend(self._confirmed(turn, own_previous, provenance, intent))
        if intent is Intent.FORGET:
            return out  # what the user wants forgotten is not recorded again as an event
        has_facts = any(c.kind is MemoryKind.FACT for c in out)
        return out + self._episode(turn, provenance, has_facts=has_facts)

    def _read_facts(self, turn: Turn, out: list[Candidate], intent: Intent,
                    provenance: Provenance, sarcastic: bool) -> list[Candidate]:
        """The rules' facts with the fact reader's second opinion: its extra facts added
        (a liking said with an eye-roll is none), the ones it rejects dropped."""
        assert self._reads_facts is not None
        stated = stated_text(turn.content)
        if not stated:
            return out
        ruled = [(c.key, c.value or "") for c in out
                 if c.kind is MemoryKind.FACT and c.key and c.intent is not Intent.FORGET]
        added, dropped = self._reads_facts.read(stated, ruled)
        kept = [c for c in out if not (c.kind is MemoryKind.FACT and c.key in dropped
                                       and c.intent is Intent.NONE)]
        when = turn.created_at
        for key, value in added:
            if sarcastic and key.startswith("preference") and not value.startswith(
                    ("dislikes", "不喜欢")):
                continue
            sentence = next((s for s in split_sentences(stated) if value in s), stated)
            cand = Candidate(
                kind=MemoryKind.FACT, key=key, value=value, text=_clause(sentence, value),
                confidence=0.45 if is_hedged(sentence) else 0.8, source=Source.USER_STATED,
                intent=_fact_intent(intent, sentence, False), scope_tags=_tags(sentence),
                provenance=provenance, event_time=when, metadata={"read_by": "fact_model"})
            kept.append(spoken_by(cand, speaker_of(turn)))
        return kept

    def _confirmed(self, turn: Turn, previous: str | None, provenance: Provenance,
                   intent: Intent) -> list[Candidate]:
        """The facts of ``previous``'s hedged sentences, stated, when ``turn`` confirms them."""
        if (self._reads_confirm is None or not previous or intent is not Intent.NONE
                or not is_hedged(previous) or is_question(turn.content)):
            return []
        hedged = [s for s in split_sentences(previous) if is_hedged(s)]
        if not any(match_facts(unhedged(s)) for s in hedged):
            return []
        if not self._reads_confirm(turn.content, previous):
            return []
        return [c.model_copy(update={"metadata": {**c.metadata, "confirms": turn.turn_id}})
                for s in hedged for c in self._facts(unhedged(s), Intent.NONE, provenance, turn)]

    def _facts(self, sentence: str, intent: Intent, provenance: Provenance,
               turn: Turn) -> list[Candidate]:
        speaker = speaker_of(turn)
        return [spoken_by(c, speaker) for c in self._stated(sentence, intent, provenance, turn)]

    def _stated(self, sentence: str, intent: Intent, provenance: Provenance,
                turn: Turn) -> list[Candidate]:
        if _HYPOTHETICAL.search(sentence):
            return []  # "if I lived in Paris …", "要是我有钱…": nothing the speaker is or has
        hedged = is_hedged(sentence)
        when = find_time_phrase(sentence, turn.created_at)
        event_time = when.when if when else turn.created_at
        matches = match_facts(unhedged(sentence))
        found = [Candidate(
            kind=MemoryKind.FACT, key=fact.key, value=fact.value,
            text=_clause(sentence, fact.value) if len(matches) > 1 else sentence.strip(),
            confidence=0.45 if hedged else fact.confidence, source=Source.USER_STATED,
            intent=_fact_intent(intent, sentence, fact.change), scope_tags=_tags(sentence),
            provenance=provenance, event_time=event_time) for fact in matches]
        if (found or intent is Intent.FORGET or not has_remember(sentence)
                or is_reminder(sentence)):
            return found
        text = strip_request(sentence)
        if speaker_of(turn) and not _FIRST_PERSON.search(text):
            return []  # among people, "remember, Jon, just do it!" is said to the other one
        key = f"note:{key_part(redact(text))[:40]}"
        return [Candidate(kind=MemoryKind.FACT, key=key, value=text, text=text, confidence=0.9,
                          intent=Intent.REMEMBER, scope_tags=_tags(sentence),
                          provenance=provenance, event_time=event_time)]

    def _episode(self, turn: Turn, provenance: Provenance, has_facts: bool) -> list[Candidate]:
        text = turn.content.strip()
        kind = next((name for name, p in _EPISODE_TYPES if p.search(text)), None)
        # every substantive user turn is an episode (turn granularity, one turn of
        # provenance); chit-chat is dropped by the quality filter downstream
        if is_acknowledgement(text) or (count_tokens(text) < MIN_EPISODE_TOKENS
                                         and not has_facts):
            return []  # "ok thanks", "哈哈哈", "行": nothing happened worth recalling
        sentiment = (0.5 if _POS.search(text) else 0.0) - (0.5 if _NEG.search(text) else 0.0)
        obj = _OBJECT.search(text)
        return [Candidate(kind=MemoryKind.EPISODE, text=text, confidence=0.7,
                          episode_type=kind or "event", sentiment=sentiment,
                          business_object=(obj.group(1) or obj.group(2)) if obj else None,
                          provenance=provenance, event_time=turn.created_at,
                          scope_tags=_tags(text), speaker=speaker_of(turn))]

    @staticmethod
    def is_temporary(text: str) -> bool:
        return bool(_TEMPORARY.search(text))

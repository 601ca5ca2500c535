"""The learned intent detector (issue #36) on writers it never saw: trained on the
development writers of ``tests/data/intents``, read on the held-out ones (the split of
``bench/intents.py``, fixed before tuning). Floors a little under the measured figures
(docs/benchmarks.md), so that a change that loses generalisation fails here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import intents as bench

from strata.extract.intent_model import (
    ARTIFACT,
    ARTIFACT_BAR,
    DOUBTED_BAR,
    FORGET_SAID,
    LABEL_THRESHOLDS,
    SHIPPED_FORGET_BAR,
    CombinedIntents,
    LearnedIntents,
    RuleIntents,
    Utterance,
    doubted,
)


@pytest.fixture(scope="module")
def split() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    rows = bench.load()
    return ([r for r in rows if r["writer"] in bench.DEV],
            [r for r in rows if r["writer"] in bench.HELD_OUT])


def test_the_corpus_is_sixteen_writers_in_two_languages(
        split: tuple[list[dict[str, object]], list[dict[str, object]]]) -> None:
    rows = [*split[0], *split[1]]
    assert len({r["writer"] for r in rows}) == 16 and len(rows) >= 5700
    for lang in ("en", "zh"):
        assert sum(r["lang"] == lang for r in rows) >= 800


def test_on_held_out_writers_the_model_reads_what_the_rules_miss(
        split: tuple[list[dict[str, object]], list[dict[str, object]]]) -> None:
    train, test = split
    # as the shards read it (packaged_detector): the forget cue and the label thresholds
    combined = CombinedIntents(LearnedIntents(train), cue=FORGET_SAID,
                               thresholds=LABEL_THRESHOLDS,
                               forget_threshold=SHIPPED_FORGET_BAR, rule_backed=DOUBTED_BAR,
                               doubt=doubted,
                               artifact=ARTIFACT, artifact_bar=ARTIFACT_BAR)
    said = {name: [r.intent for r in d.read(bench.utterances(test))]
            for name, d in (("rules", RuleIntents()), ("combined", combined))}
    scores = {name: bench.scores(test, p) for name, p in said.items()}
    for lang in ("en", "zh"):
        precision, recall, _ = scores["combined"][("forget", lang)]
        assert precision >= 0.85 and recall >= 0.85, (lang, precision, recall)
        precision, recall, _ = scores["combined"][("change", lang)]  # a change supersedes
        assert precision >= 0.9 and recall >= 0.75, (lang, precision, recall)
        assert recall > scores["rules"][("forget", lang)][1] + 0.5
        for intent in ("confirm", "event"):  # the rules have no reading of these at all
            assert scores["combined"][(intent, lang)][1] >= 0.8, (intent, lang)


def test_a_confirmation_is_read_from_the_turn_before(
        split: tuple[list[dict[str, object]], list[dict[str, object]]]) -> None:
    combined = CombinedIntents(LearnedIntents(split[0]))
    asked = "You mentioned you might be vegetarian. Is that right?"
    read = combined.read([Utterance("yes, that's right", asked),
                          Utterance("I forgot my keys at the gym again"),
                          Utterance("please forget everything you know about me")])
    assert [r.intent for r in read] == ["confirm", "none", "forget"], read


def test_a_rules_forget_of_a_thing_outside_the_memory_needs_the_model() -> None:
    # the model is fitted on the packaged rows; a deleted draft is a task, "forget my address"
    # stays a forget, and without the artifact bar the rules' 删了 stands
    from strata.extract.intent_model import training_rows

    learned = LearnedIntents(training_rows())
    shipped = CombinedIntents(learned, cue=FORGET_SAID, thresholds=LABEL_THRESHOLDS,
                              forget_threshold=SHIPPED_FORGET_BAR, rule_backed=DOUBTED_BAR,
                              doubt=doubted,
                              artifact=ARTIFACT, artifact_bar=ARTIFACT_BAR)
    loose = CombinedIntents(learned, cue=FORGET_SAID, thresholds=LABEL_THRESHOLDS,
                            forget_threshold=SHIPPED_FORGET_BAR, doubt=doubted)
    draft = Utterance("帮我把那封邮件草稿删了")
    assert loose.read([draft])[0].intent == "forget"
    assert shipped.read([draft])[0].intent != "forget"
    for text in ("Forget that my codename is Bluefin.", "请忘记我对花生过敏",
                 "delete what you know about my home address"):
        assert shipped.read([Utterance(text)])[0].intent == "forget", text

"""The table of ranking parameters: every field says what it does and where its value came
from and belongs to one stage, the committed page is what the code generates, and
docs/architecture.md's recall section quotes no figure the table does not hold and lists
the stages the code runs, in its order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from strata.recall.candidates import CANDIDATES
from strata.recall.granularity import FORMULA, RANKING
from strata.recall.parameters import (
    PROFILE_FIELDS,
    RANKING_FIELDS,
    figures,
    main,
    render,
    stage_of,
    value_text,
)
from strata.recall.pipeline import Phase
from strata.recall.recipes import BY_HAND, DEFAULT, RECIPES, RecallRecipe, without
from strata.recall.stages import DEFAULT_STAGES, ORDER, REQUIRED, STAGES, Stage

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _recall_section() -> str:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    start = text.index("## Recall (`strata/recall/`)")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_every_parameter_says_what_it_does_and_where_its_value_came_from() -> None:
    for name in RANKING_FIELDS:
        field = RecallRecipe.model_fields[name]
        assert field.description, name
        extra = field.json_schema_extra
        assert isinstance(extra, dict), name
        source = str(extra.get("source", ""))
        # a measured choice names its section of docs/benchmarks.md; anything else is by hand
        assert source.startswith(BY_HAND) or (
            "leave-one-conversation-out on LoCoMo dev, 2026-" in source
            and "docs/benchmarks.md#" in source), (name, source)


def test_every_cited_benchmark_section_exists() -> None:
    headings = [line[3:].strip() for line in (DOCS / "benchmarks.md").read_text(
        encoding="utf-8").splitlines() if line.startswith("## ")]
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
    for name in RANKING_FIELDS:
        extra = RecallRecipe.model_fields[name].json_schema_extra
        assert isinstance(extra, dict)
        for anchor in re.findall(r"docs/benchmarks\.md#([\w-]+)", str(extra["source"])):
            assert anchor in anchors, (name, anchor)


def test_the_committed_page_is_what_the_code_generates() -> None:
    committed = (DOCS / "ranking-parameters.md").read_text(encoding="utf-8")
    assert committed == render(), (
        "docs/ranking-parameters.md is stale: run "
        "python -m strata.recall.parameters --write docs/ranking-parameters.md")


def test_the_page_shows_each_profiles_overrides() -> None:
    page = render()
    row = next(line for line in page.splitlines() if line.startswith("| `half_life_days` |"))
    assert value_text(RECIPES["advisor"].half_life_days) in row  # advisor: 90 / 14 days
    row = next(line for line in page.splitlines() if line.startswith("| `dense_share` |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[1:10] == ["`fusion`", "0.5", "", "", "", "1.0", "0.0", "", ""]
    row = next(line for line in page.splitlines() if line.startswith("| `late_interaction` |"))
    assert row.endswith("| `dense`, `lexical`, `turns`, `pooled` |")  # the profiles without it


def test_the_check_mode_fails_on_a_stale_page(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    assert main(["--write", str(page)]) == 0 and main(["--check", str(page)]) == 0
    page.write_text(page.read_text(encoding="utf-8").replace("| 0.4 |", "| 0.5 |"))
    assert main(["--check", str(page)]) == 1


def test_the_recall_section_quotes_no_figure_outside_the_table() -> None:
    section = _recall_section()
    assert "](ranking-parameters.md)" in section
    known = set().union(*(figures(r) for r in RECIPES.values()))
    quoted = {float(x) for x in re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", section)}
    assert quoted <= known, f"figures not in the table: {sorted(quoted - known)}"


@pytest.mark.parametrize("name", ["answer_boost", "period_candidates", "time_boost",
                                  "late_share", "question_penalty", "speaker_boost"])
def test_the_recall_section_names_the_parameters_it_describes(name: str) -> None:
    assert re.search(rf"(?<![\w.]){name}(?!\w)", _recall_section())


def test_recipes_are_still_built_by_name_and_field() -> None:
    custom = RecallRecipe(name="x", time_boost=0.3)
    assert custom.time_boost == 0.3 and custom.answer_boost == DEFAULT.answer_boost
    assert RECIPES["hybrid"] is DEFAULT and "store" not in RECIPES


def test_every_parameter_belongs_to_one_stage() -> None:
    owners = {name: [s for s, info in STAGES.items() if name in info.parameters]
              for name in RANKING_FIELDS if name not in PROFILE_FIELDS}
    assert {name: len(stages) for name, stages in owners.items()} == dict.fromkeys(owners, 1)
    owned = {p for info in STAGES.values() for p in info.parameters}
    assert owned <= set(RANKING_FIELDS), owned - set(RANKING_FIELDS)  # no stale name
    assert stage_of("late_share") is Stage.LATE_INTERACTION and stage_of("layers") is None


def test_the_recall_section_lists_the_stages_the_code_runs_in_order() -> None:
    section = _recall_section()
    listed = re.search(r"\*\*The stages\*\*[^`]*((?:`\w+`[\s→,]*)+)", section)
    assert listed, "the recall section lists the stages as **The stages** `search` → ..."
    names = re.findall(r"`(\w+)`", listed.group(1))
    assert names == [s.value for s in ORDER]  # every stage, the default's and the others
    for stage in set(ORDER) - set(DEFAULT_STAGES):  # one the default leaves out says so
        assert re.search(rf"`{stage.value}` is not in\s+the\s+default", section), stage
    for stage in Stage:  # and says what each one's parameters are called
        for parameter in STAGES[stage].parameters:
            assert re.search(rf"(?<![\w.]){parameter}(?!\w)", section), (stage, parameter)


def test_a_stage_is_switched_off_by_leaving_it_out_in_order_and_never_a_required_one() -> None:
    assert DEFAULT.stages == DEFAULT_STAGES and not RECIPES["pooled"].runs(
        Stage.LATE_INTERACTION)
    assert RecallRecipe(name="x", stages=without(Stage.MERGE)).runs(Stage.SESSION)
    with pytest.raises(ValueError, match="order"):
        RecallRecipe(name="x", stages=(Stage.FUSION, Stage.SEARCH, Stage.SELECT,
                                       Stage.ASSEMBLY))
    with pytest.raises(ValueError, match="twice"):
        RecallRecipe(name="x", stages=(*DEFAULT_STAGES, Stage.MERGE))
    for stage in REQUIRED:
        with pytest.raises(ValueError, match="needs"):
            RecallRecipe(name="x", stages=without(stage))


def test_each_stage_is_run_by_the_table_of_the_module_its_row_names() -> None:
    tables = {"strata.recall.candidates": set(CANDIDATES.steps),
              "strata.recall.granularity": set(RANKING.steps) | FORMULA}
    for stage, info in STAGES.items():
        if info.module in tables:
            assert stage in tables[info.module], (stage, info.module)
    stepped = [*CANDIDATES.steps, *RANKING.steps, *FORMULA]
    assert len(stepped) == len(set(stepped)), "a stage with two steps"
    assert set(stepped) == {s for s, i in STAGES.items() if i.module in tables}


def test_a_phase_runs_only_the_stages_the_recipe_lists_in_the_recipes_order() -> None:
    ran: list[Stage] = []
    phase = Phase[list[Stage]]("test", {s: (lambda state, s=s: state.append(s))
                                        for s in (Stage.MERGE, Stage.SEARCH, Stage.SAID_THEN)})
    assert phase.run(DEFAULT, ran) == [Stage.SEARCH, Stage.SAID_THEN, Stage.MERGE]
    left_out = RecallRecipe(name="x", stages=without(Stage.SAID_THEN))
    assert phase.run(left_out, []) == [Stage.SEARCH, Stage.MERGE]

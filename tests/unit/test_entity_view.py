"""The entity view (#38): derived from the memories a viewer sees, edited through an overlay
kept per user and lane (``strata.entities.overlay``), forgotten like a conversational
forget — and the overlay's store contract, on the in-process double and on Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from strata.entities import EntityIndex, default_gazetteer, default_lexicon
from strata.entities.models import EntityType, LinkKind
from strata.entities.overlay import (
    ADMIN_LANE,
    SHARED_LANE,
    EntityEdits,
    EntityEditStore,
    InMemoryEntityEditStore,
    apply_edits,
    combined,
    lane_of,
    lanes_seen_by,
    public_id,
)
from strata.entities.overlay_redis import RedisEntityEditStore
from strata.entities.view import EntityPatch, EntitySummary
from strata.errors import InvalidInput, NotFound
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Scope
from strata.portability import (
    ExportHeader,
    entity_edits_line,
    header_line,
    parse_export,
)
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
V = Scope(tenant="t", user="v")
TAMPA = "I took my dog Max to the beach in Tampa last weekend."
PARK = "Every morning Max runs to the park near our house."
VIOLIN = "I started learning the violin."


# -- the store contract: the double and Redis answer alike ------------------------------------
@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest, redis_store: RedisStore) -> Iterator[EntityEditStore]:
    if request.param == "memory":
        yield InMemoryEntityEditStore()
    else:
        yield RedisEntityEditStore(redis_store.connection)


def test_the_store_keeps_each_lane_of_each_user_apart(store: EntityEditStore) -> None:
    assert store.load(U, ADMIN_LANE) == EntityEdits() and store.lanes(U) == {}
    admin = EntityEdits().rename("name:max", "Maxie").delete("thing:park")
    planner = EntityEdits().retype("name:max", EntityType.PERSON)
    store.save(U, ADMIN_LANE, admin)
    store.save(U, "planner", planner)
    store.save(V, ADMIN_LANE, EntityEdits().delete("thing:violin"))
    assert store.load(U, ADMIN_LANE) == admin and store.load(U, "planner") == planner
    assert store.lanes(U) == {ADMIN_LANE: admin, "planner": planner}
    assert store.lanes(V) == {ADMIN_LANE: EntityEdits().delete("thing:violin").model_copy(
        update={"updated_at": store.lanes(V)[ADMIN_LANE].updated_at})}
    store.save(U, "planner", EntityEdits())  # empty: the lane goes
    assert list(store.lanes(U)) == [ADMIN_LANE]
    assert store.delete(U) is True and store.lanes(U) == {} and store.delete(U) is False
    assert list(store.lanes(V)) == [ADMIN_LANE]  # another user's stay


def test_the_store_keeps_names_as_written(store: EntityEditStore) -> None:
    edits = EntityEdits().rename("name:小白", "小白 (猫)").rename("title:a/b", "A/B “quoted”")
    store.save(U, SHARED_LANE, edits)
    assert store.load(U, SHARED_LANE).renamed == edits.renamed


# -- the overlay over a derived index -----------------------------------------------------------
@pytest.fixture(scope="module")
def index() -> EntityIndex:
    built = EntityIndex(default_gazetteer(), default_lexicon())
    built.add("m1", TAMPA, speaker="Ann")
    built.add("m2", PARK, speaker="Ann")
    built.add("m3", "We visited Miami, Florida in June.")
    built.add("m4", VIOLIN)
    return built


def _by_name(snapshot_entities: list, name: str):  # type: ignore[no-untyped-def]
    return next(e for e in snapshot_entities if e.name == name)


def test_a_merge_folds_mentions_names_and_links_into_its_target(index: EntityIndex) -> None:
    snap = index.snapshot()
    tampa, florida = _by_name(snap.entities, "Tampa"), _by_name(snap.entities, "Florida")
    miami = _by_name(snap.entities, "Miami")
    out = apply_edits(snap, EntityEdits().merge(tampa.id, miami.id))
    ids = {e.id for e in out.entities}
    assert tampa.id not in ids and miami.id in ids
    assert set(out.mentions[miami.id]) == {"m1", "m3"}
    assert "Tampa" in _by_name(out.entities, "Miami").aliases
    assert florida.id in ids  # what it was in stays


def test_a_delete_takes_the_entity_its_mentions_and_the_links_to_it(index: EntityIndex) -> None:
    snap = index.snapshot()
    florida = _by_name(snap.entities, "Florida")
    out = apply_edits(snap, EntityEdits().delete(florida.id))
    assert florida.id not in {e.id for e in out.entities} and florida.id not in out.mentions
    tampa = _by_name(out.entities, "Tampa")
    assert all(link.target != florida.id for link in tampa.links)
    assert out.mentions[tampa.id] == ["m1"]  # the memories stay


def test_a_rename_keeps_the_old_name_as_an_alias_and_a_retype_sticks(index: EntityIndex) -> None:
    snap = index.snapshot()
    edits = EntityEdits().rename("name:max", "Maxie").retype("name:max", EntityType.PERSON)
    maxie = _by_name(apply_edits(snap, edits).entities, "Maxie")
    assert maxie.id == "name:max" and "Max" in maxie.aliases
    assert maxie.type is EntityType.PERSON


def test_edits_of_entities_the_index_lacks_and_merge_cycles_change_nothing(
        index: EntityIndex) -> None:
    snap = index.snapshot()
    assert apply_edits(snap, EntityEdits().rename("name:nobody", "X").delete("thing:none")
                       .merge("name:max", "name:nobody")) == snap
    cycle = EntityEdits().merge("name:max", "thing:violin").merge("thing:violin", "name:max")
    out = apply_edits(snap, cycle)
    assert len(out.entities) == len(snap.entities) - 1  # one folds, not both, not none


def test_lanes_an_agents_edits_change_only_its_own_view() -> None:
    assert lane_of(None) == ADMIN_LANE and lane_of("") == SHARED_LANE
    assert lanes_seen_by(None) == [ADMIN_LANE]
    assert lanes_seen_by("planner") == [ADMIN_LANE, "planner"]
    admin = EntityEdits().rename("name:max", "Max the dog")
    planner = EntityEdits().rename("name:max", "Maxie").delete("thing:park")
    seen = combined([admin, planner])
    assert seen.renamed == {"name:max": "Maxie"} and seen.deleted == ["thing:park"]
    assert public_id("title:a/b").isalnum() and len(public_id("x")) == 16


# -- the view through the shard ----------------------------------------------------------------
@pytest.fixture
def graceful(redis_store: RedisStore, vectors: FakeVectorStore) -> SessionShardService:
    """A shard with a 60 s forget grace period and the entity edits in the test's Redis."""
    from strata.stores.embedders import HashEmbedder

    lt = LongTermMemory(vectors, HashEmbedder(64))
    return SessionShardService(0, Settings(forget_grace_s=60.0), redis_store, RuleSummarizer(),
                               longterm=lambda: lt,
                               entity_edits=RedisEntityEditStore(redis_store.connection))


def _say(shard: SessionShardService, text: str, scope: Scope = U, **extra: object) -> str:
    made = shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE, text=text,
                                                   **extra))  # type: ignore[arg-type]
    return str(made["memory"]["id"])


def _named(shard: SessionShardService, name: str, viewer: str | None = None,
           scope: Scope = U) -> EntitySummary:
    listed = shard.list_entities(scope, viewer).entities
    found = [e for e in listed if e.name == name]
    assert found, f"{name!r} not in {[e.name for e in listed]}"
    return found[0]


def _names(shard: SessionShardService, viewer: str | None = None) -> set[str]:
    return {e.name for e in shard.list_entities(U, viewer).entities}


def test_the_view_lists_entities_with_counts_and_links(graceful: SessionShardService) -> None:
    _say(graceful, TAMPA, metadata={"speaker": "Ann"})
    _say(graceful, PARK)
    _say(graceful, VIOLIN)
    max_ = _named(graceful, "Max")
    assert (max_.type, max_.mentions) == (EntityType.PET, 2)
    assert {(lk.kind, lk.name) for lk in max_.links} >= {(LinkKind.RELATION, "dog"),
                                                        (LinkKind.OWNER, "Ann")}
    tampa = _named(graceful, "Tampa")
    assert tampa.within[:2] == ["Florida", "United States"]
    florida = graceful.entity(U, _named(graceful, "Florida").id)
    assert [c.name for c in florida.contains] == ["Tampa"]
    assert [m.text for m in florida.mention_list] == [TAMPA]  # through Tampa
    assert florida.mention_list[0].via == tampa.id
    assert _named(graceful, "violin").links[0].name == "instrument"


def test_an_entitys_mentions_are_newest_first_across_sessions(
        graceful: SessionShardService) -> None:
    first = graceful.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=TAMPA,
                                                   session_id="s1"))["memory"]["id"]
    time.sleep(0.01)
    second = graceful.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=PARK,
                                                    session_id="s2"))["memory"]["id"]
    detail = graceful.entity(U, _named(graceful, "Max").id)
    assert [m.memory_id for m in detail.mention_list] == [second, first]
    assert [m.session_id for m in detail.mention_list] == ["s2", "s1"] and detail.sessions == 2


def test_the_view_follows_the_memories_written_and_deleted_since(
        graceful: SessionShardService) -> None:
    _say(graceful, PARK)
    assert "violin" not in _names(graceful)
    violin = _say(graceful, VIOLIN)
    assert "violin" in _names(graceful)  # the kept index took the new memory
    graceful.delete_memory(U, violin)
    assert "violin" not in _names(graceful)
    assert _named(graceful, "Max").mentions == 1


def test_a_viewer_sees_only_the_entities_of_what_it_may_see(
        graceful: SessionShardService) -> None:
    _say(graceful, PARK)
    _say(graceful, VIOLIN, agent="planner", visibility="private")
    assert "violin" in _names(graceful, "planner") and "violin" in _names(graceful)
    assert "violin" not in _names(graceful, "coach") and "violin" not in _names(graceful, "")
    with pytest.raises(NotFound):
        graceful.entity(U, public_id("thing:violin"), "coach")
    assert graceful.list_entities(V).entities == []  # another user: nothing


def test_rename_retype_merge_and_delete_are_kept_per_lane(
        graceful: SessionShardService) -> None:
    _say(graceful, TAMPA)
    _say(graceful, PARK)
    _say(graceful, "We visited Miami, Florida in June.")
    max_id = _named(graceful, "Max").id
    renamed = graceful.edit_entity(U, max_id, EntityPatch(name="  Maxie  the dog "))
    assert renamed.name == "Maxie the dog" and "Max" in renamed.aliases
    assert "Maxie the dog" in _names(graceful) and "Maxie the dog" in _names(graceful, "coach")
    mine = graceful.edit_entity(U, max_id, EntityPatch(type=EntityType.PERSON), "planner")
    assert mine.type is EntityType.PERSON and _named(graceful, "Maxie the dog").type \
        is EntityType.PET  # the planner's retype is the planner's
    miami = _named(graceful, "Miami")
    joined = graceful.edit_entity(U, _named(graceful, "Tampa").id,
                                  EntityPatch(merge_into=miami.id))
    assert joined.id == miami.id and joined.mentions == 2 and "Tampa" in joined.aliases
    assert "Tampa" not in _names(graceful)
    gone = graceful.delete_entity(U, miami.id, "coach")
    assert gone["memories_kept"] == 2
    assert "Miami" not in _names(graceful, "coach") and "Miami" in _names(graceful)
    assert len(graceful.list_memories(U, None, None, None, 100)) == 3  # memories stay
    with pytest.raises(NotFound):
        graceful.edit_entity(U, miami.id, EntityPatch(name="x"), "coach")
    with pytest.raises(InvalidInput):
        graceful.edit_entity(U, max_id, EntityPatch(merge_into=max_id))


def test_a_patch_needs_something_to_change() -> None:
    with pytest.raises(ValueError, match="give name, type or merge_into"):
        EntityPatch()
    with pytest.raises(ValueError, match="blank"):
        EntityPatch(name="   ")
    with pytest.raises(ValueError):
        EntityPatch(merge_into="not-an-id")


def test_forgetting_an_entity_hides_its_memories_undoably_then_for_good(
        graceful: SessionShardService) -> None:
    _say(graceful, TAMPA)
    _say(graceful, PARK)
    violin = _say(graceful, VIOLIN)
    view = graceful.forget_entity(U, _named(graceful, "Max").id)
    assert (view.hidden, view.state, view.target) == (2, "undoable", "Max")
    assert view.undo_until is not None
    weights = {m.text: m.weight for m in graceful.longterm.list_items(U, MemoryKind.EPISODE)}
    assert weights == {TAMPA: 0.0, PARK: 0.0, VIOLIN: 1.0}
    assert "Max" not in _names(graceful) and "violin" in _names(graceful)
    [listed] = graceful.list_forgets(U)
    assert listed.forget_id == view.forget_id and listed.hidden == 2
    assert graceful.undo_forget(U, view.forget_id).restored == 2
    assert "Max" in _names(graceful)
    again = graceful.forget_entity(U, _named(graceful, "Max").id)
    assert graceful.finalise_forgets(now=time.time() + 61) == 2
    assert [m.id for m in graceful.longterm.list_items(U, MemoryKind.EPISODE)] == [violin]
    assert [f.state for f in graceful.list_forgets(U) if f.forget_id == again.forget_id] == \
        ["final"]


def test_an_agents_forget_reaches_only_what_it_sees(graceful: SessionShardService) -> None:
    _say(graceful, PARK)
    _say(graceful, TAMPA, agent="coach", visibility="private")
    view = graceful.forget_entity(U, _named(graceful, "Max", "planner").id, "planner")
    assert view.hidden == 1 and view.agent == "planner"
    weights = {m.text: m.weight for m in graceful.longterm.list_items(U, MemoryKind.EPISODE)}
    assert weights == {PARK: 0.0, TAMPA: 1.0}


def test_the_edits_go_out_in_an_export_come_back_in_an_import_and_go_with_the_user(
        graceful: SessionShardService) -> None:
    _say(graceful, PARK)
    _say(graceful, VIOLIN)
    graceful.edit_entity(U, _named(graceful, "Max").id, EntityPatch(name="Maxie"))
    graceful.delete_entity(U, _named(graceful, "violin").id, "planner")
    lanes = graceful.export_entity_edits(U)
    assert set(lanes) == {ADMIN_LANE, "planner"}
    assert set(graceful.export_entity_edits(U, "planner")) == {"planner"}
    assert graceful.export_entity_edits(U, "coach") == {}
    header = ExportHeader(embed_model="hash-64", exported_at=lanes[ADMIN_LANE].updated_at,
                          tenant="t", users=["u"])
    text = header_line(header) + entity_edits_line("u", lanes)
    parsed = parse_export(text)
    assert parsed.one_user() == [] and parsed.edits_of_one_user() == lanes
    graceful.delete_user(U)
    assert graceful.export_entity_edits(U) == {}
    _say(graceful, PARK)
    _say(graceful, VIOLIN)
    assert graceful.import_entity_edits(U, parsed.edits_of_one_user()) == 2
    assert "Maxie" in _names(graceful) and "violin" not in _names(graceful, "planner")
    # an agent key's import lands in its own lane, whatever lanes the file names
    graceful.delete_user(U)
    assert graceful.import_entity_edits(U, parsed.edits_of_one_user(), "coach") == 1
    assert list(graceful.export_entity_edits(U)) == ["coach"]


def test_an_export_with_a_bad_edits_line_is_refused_whole() -> None:
    header = header_line(ExportHeader(embed_model="m", exported_at="2026-12-03T00:00:00Z",
                                      tenant="t", users=["u"]))
    with pytest.raises(InvalidInput, match="line 2: not entity edits"):
        parse_export(header + '{"user_id": "u", "entity_edits": {"bad lane!": {}}}\n')
    with pytest.raises(InvalidInput, match="line 2: not entity edits"):
        parse_export(header + '{"user_id": "u", "entity_edits": {"*": {"nope": 1}}}\n')
    mixed = header + entity_edits_line("u", {ADMIN_LANE: EntityEdits().delete("x")}) + \
        entity_edits_line("w", {ADMIN_LANE: EntityEdits().delete("y")})
    with pytest.raises(InvalidInput, match="line 3: user 'w' after 'u'"):
        parse_export(mixed).one_user()

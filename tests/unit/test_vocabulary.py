"""One vocabulary: ``Layer`` maps to the stored names, and the enums keep the wire values."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from strata.models import (
    LONG_TERM,
    Collection,
    Layer,
    MemoryKind,
    MemoryStatus,
    RecallRequest,
    RecallResponse,
    RecordFilter,
    StoredRecord,
)


def test_each_layer_names_its_collection_and_kind() -> None:
    assert [(layer.collection, layer.kind) for layer in LONG_TERM] == [
        (Collection.FACTS, MemoryKind.FACT), (Collection.EPISODES, MemoryKind.EPISODE),
        (Collection.PROCEDURES, MemoryKind.PROCEDURE)]
    assert Layer.KNOWLEDGE.collection is Collection.KNOWLEDGE
    assert Layer.KNOWLEDGE.kind is None and not Layer.KNOWLEDGE.long_term
    assert Layer.WORKING.kind is None and not Layer.WORKING.long_term
    with pytest.raises(ValueError, match="working memory"):
        _ = Layer.WORKING.collection


def test_the_map_reads_both_ways() -> None:
    for kind in MemoryKind:
        assert Layer.of_kind(kind).kind is kind
    for collection in Collection:
        assert Layer.of_collection(collection).collection is collection


def test_the_api_speaks_the_same_layer_names() -> None:
    request = RecallRequest(user_id="ann", query="q", layers=["facts", "knowledge"])  # type: ignore[list-item]
    assert request.layers == [Layer.FACTS, Layer.KNOWLEDGE]
    response = RecallResponse(context="", items=[], route="mixed", layers=[Layer.WORKING])
    assert json.loads(response.model_dump_json())["layers"] == ["working"]
    with pytest.raises(ValidationError):
        RecallRequest(user_id="ann", query="q", layers=["fact"])  # type: ignore[list-item]


def test_statuses_are_stored_and_filtered_as_their_values() -> None:
    record = StoredRecord(id="m1", text="t", status="cold")  # type: ignore[arg-type]
    assert record.status is MemoryStatus.COLD
    assert record.model_dump(mode="json")["status"] == "cold"
    # a StrEnum formats as its value: filter expressions and ids are built with f-strings
    assert f"{record.status}" == "cold"
    flt = RecordFilter(statuses=["active"])  # type: ignore[list-item]
    assert json.dumps(flt.statuses) == '["active"]'
    with pytest.raises(ValidationError):
        RecordFilter(statuses=["lost"])  # type: ignore[list-item]

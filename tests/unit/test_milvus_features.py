"""What a Milvus server can do, from its version (``strata.stores.milvus_features``)."""

from __future__ import annotations

import pytest

from strata.stores.lexical import bm25_scores, bm25_term_scores, normalize
from strata.stores.milvus_features import MilvusFeatures, parse_version


def test_versions_parse_as_servers_print_them() -> None:
    assert parse_version("v2.3.5-lite") == (2, 3, 5)
    assert parse_version("2.5.0") == (2, 5, 0)
    assert parse_version("v2.6") == (2, 6, 0)
    with pytest.raises(ValueError):
        parse_version("unknown")


@pytest.mark.parametrize(("version", "bm25", "partial", "partition_key"), [
    ("v2.3.5-lite", False, False, False),
    ("v2.4.9", False, False, True),  # sparse vectors, but no BM25 function yet
    ("v2.5.0", True, False, True),
    ("v2.6.1", True, False, True),
    ("v2.6.2", True, True, True),
])
def test_a_server_s_features_follow_its_version(version: str, bm25: bool, partial: bool,
                                                partition_key: bool) -> None:
    features = MilvusFeatures.of_server(version)
    assert (features.bm25_function, features.partial_update, features.partition_key) == (
        bm25, partial, partition_key)
    assert features.nullable_fields is bm25
    assert features.consistency_level == "Strong"  # readers are other processes


def test_milvus_lite_keeps_everything_and_its_defaults() -> None:
    lite = MilvusFeatures.lite()
    assert lite.bm25_function and lite.partial_update and lite.partition_key
    assert lite.consistency_level is None


def test_bm25_of_normalised_terms_is_bm25_of_the_texts() -> None:
    texts = ["I am allergic to peanuts", "peanuts and more peanuts", "我住在北京", "nothing"]
    query = "peanut allergy 北京"
    assert bm25_term_scores(normalize(query).split(),
                            [normalize(t).split() for t in texts]) == pytest.approx(
        bm25_scores(query, texts))
    assert bm25_term_scores(["x"], []) == []

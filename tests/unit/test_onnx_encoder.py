"""The local model on ONNX Runtime: the same vectors as torch, one export per cache, and
torch kept where the graph cannot be used."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from strata.errors import EmbedderError
from strata.recall.late import embed_queries
from strata.settings import Settings
from strata.stores.embedders import MiniLMEmbedder, make_embedder

pytest.importorskip("onnxruntime", reason="the [local] extra installs onnxruntime")

TEXTS = ["When did Caroline go to the LGBTQ support group?", "ok", "",
         "我上周说过的那家餐厅叫什么名字？",
         "I signed up for a pottery class on Saturdays, and my sister Ana thinks it's great "
         "that I finally have a hobby that isn't work; the studio is on 5th street. " * 3]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="module")
def on_onnx(cache: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(threads=1, runtime="onnx", cache_dir=cache)


def test_onnx_gives_torchs_vectors_and_token_vectors(minilm: MiniLMEmbedder,
                                                     on_onnx: MiniLMEmbedder) -> None:
    assert (on_onnx.runtime, minilm.runtime) == ("onnx", "torch")
    for queries in (False, True):
        want, want_tokens = minilm.encode_with_tokens(TEXTS, queries=queries)
        got, got_tokens = on_onnx.encode_with_tokens(TEXTS, queries=queries)
        assert np.allclose(got, want, atol=1e-5)
        for g, w in zip(got_tokens, want_tokens, strict=True):
            assert g.shape == w.shape
            assert np.allclose(g, w, atol=1e-5)
    reference = minilm._model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert np.allclose(on_onnx.encode(TEXTS), reference, atol=1e-5)
    (query,) = embed_queries(on_onnx, ["Where does my sister live?"])
    assert query.tokens is not None and len(query.tokens) >= 2


def test_the_graph_is_exported_once_and_reused(cache: Path, on_onnx: MiniLMEmbedder) -> None:
    (graph,) = cache.glob("*.onnx")
    written = graph.stat().st_mtime_ns
    again = MiniLMEmbedder(threads=1, runtime="onnx", cache_dir=cache)
    assert list(cache.glob("*.onnx")) == [graph] and graph.stat().st_mtime_ns == written
    assert np.allclose(again.encode(TEXTS), on_onnx.encode(TEXTS), atol=1e-6)
    assert not list(cache.glob("*.tmp"))


def test_exporting_leaves_the_torch_model_as_it_was(tmp_path: Path) -> None:
    model = MiniLMEmbedder(threads=1)
    before = model.encode(TEXTS)
    from strata.stores.onnx_encoder import OnnxEncoder

    OnnxEncoder.for_model(model._bert, model._tokenizer, 1, tmp_path)
    assert np.array_equal(model.encode(TEXTS), before)


def test_a_graph_that_cannot_run_keeps_torch_or_fails_clearly(
        tmp_path: Path, cache: Path, on_onnx: MiniLMEmbedder,
        caplog: pytest.LogCaptureFixture) -> None:
    (graph,) = cache.glob("*.onnx")
    (tmp_path / graph.name).write_bytes(b"not a graph")
    with caplog.at_level(logging.WARNING, logger="strata.stores.embedders"):
        kept = MiniLMEmbedder(threads=1, runtime="auto", cache_dir=tmp_path)
    assert kept.runtime == "torch"
    assert "stays on torch" in caplog.text
    assert np.allclose(kept.encode(TEXTS), on_onnx.encode(TEXTS), atol=1e-5)
    with pytest.raises(EmbedderError, match="ONNX Runtime"):
        MiniLMEmbedder(threads=1, runtime="onnx", cache_dir=tmp_path)


def test_a_cache_that_cannot_be_written_keeps_torch(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    kept = MiniLMEmbedder(threads=1, runtime="auto", cache_dir=blocked / "onnx")
    assert kept.runtime == "torch" and kept.encode(["hello"]).shape == (1, 384)


def test_settings_choose_the_runtime(cache: Path, on_onnx: MiniLMEmbedder) -> None:
    chosen = make_embedder(Settings(embedder="minilm", embed_runtime="auto",
                                    onnx_cache_dir=cache))
    assert isinstance(chosen, MiniLMEmbedder) and chosen.runtime == "onnx"
    torch_only = make_embedder(Settings(embedder="minilm", embed_runtime="torch"))
    assert isinstance(torch_only, MiniLMEmbedder) and torch_only.runtime == "torch"

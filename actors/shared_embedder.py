"""The Embedder deployment behind Strata's ``Embedder`` port, for a session shard that holds
no model of its own (``STRATA_SHARD_EMBEDDING=embedder``).

``shared_embedder()`` asks the deployment once what it runs (``info()``: dimension, model,
whether it has token vectors) and returns the adapter that matches: ``SharedTokenEmbedder``
(a ``JointEmbedder``: the shard's ``WriteEmbedder``, hot index and ``QueryBatcher`` use it as
they use MiniLM) or ``SharedEmbedder`` (pooled vectors only, like a remote embeddings API).
The deployment's handle is looked up on first use, so a shard can start before the Serve
app; every call goes through ``actors.boundary.strata_errors``, and an embedder that cannot
answer (no app yet, no replica, a full queue, a timeout) is an ``EmbedderError`` (503).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from ray import serve
from ray.serve.exceptions import RayServeException

from actors.boundary import strata_errors
from strata.errors import BackendUnavailable, EmbedderError

__all__ = ["APP_NAME", "CALL_TIMEOUT_S", "EmbedderCalls", "SharedEmbedder",
           "SharedTokenEmbedder", "embedder_unavailable", "shared_embedder"]

APP_NAME = "strata"  # the Serve application's name (`strata serve`, serve_config.yaml)
DEPLOYMENT = "Embedder"
CALL_TIMEOUT_S = 60.0


def embedder_unavailable(exc: Exception) -> BackendUnavailable:
    """What a caller of the Embedder deployment raises when it cannot be reached."""
    return EmbedderError(f"the embedder deployment cannot answer now; retry ({exc})")


def deployment_handle() -> Any:
    """The Embedder deployment's handle (``Any``: Serve types its methods loosely)."""
    return serve.get_deployment_handle(DEPLOYMENT, app_name=APP_NAME)


class EmbedderCalls:
    """The deployment's methods as blocking calls (a shard's threads are not in an event
    loop), with its handle looked up once, on first use."""

    def __init__(self, lookup: Callable[[], Any] = deployment_handle,
                 timeout_s: float = CALL_TIMEOUT_S) -> None:
        self._lookup = lookup
        self._handle: Any = None
        self._lock = threading.Lock()
        self._timeout_s = timeout_s

    def _deployment(self) -> Any:
        if self._handle is None:
            with self._lock:
                if self._handle is None:
                    try:
                        self._handle = self._lookup()
                    except RayServeException as exc:  # the app is not deployed (yet)
                        raise embedder_unavailable(exc) from exc
        return self._handle

    def _result(self, call: Callable[[Any], Any]) -> Any:
        with strata_errors(embedder_unavailable):
            response = call(self._deployment())
            try:
                return response.result(timeout_s=self._timeout_s)
            except TimeoutError as exc:
                raise embedder_unavailable(exc) from exc

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = self._result(lambda d: d.info.remote())
        return info

    def encode(self, texts: list[str]) -> list[list[float]]:
        rows: list[list[float]] = self._result(lambda d: d.encode_many.remote(texts))
        return rows

    def encode_with_tokens(self, texts: list[str], queries: bool = False
                           ) -> tuple[Any, list[Any]]:
        both: tuple[Any, list[Any]] = self._result(
            lambda d: d.encode_with_tokens.remote(texts, queries))
        return both

    def token_vectors(self, texts: list[str]) -> list[Any]:
        vectors: list[Any] = self._result(lambda d: d.token_vectors.remote(texts))
        return vectors


def _matrix(rows: Any) -> npt.NDArray[np.float32]:
    return np.asarray(rows, dtype=np.float32)


class SharedEmbedder:
    """Strata's ``Embedder`` port answered by the Embedder deployment."""

    def __init__(self, calls: EmbedderCalls, dim: int, model_id: str) -> None:
        self._calls = calls
        self._dim = dim
        self._model_id = model_id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return self._model_id

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return _matrix(self._calls.encode(list(texts)))


class SharedTokenEmbedder(SharedEmbedder):
    """``SharedEmbedder`` of a model with token vectors: a text's vector and its token
    vectors come back from one call (``JointEmbedder``)."""

    def encode_with_tokens(self, texts: Sequence[str], tokens: bool = True,
                           queries: bool = False
                           ) -> tuple[npt.NDArray[np.float32], list[npt.NDArray[np.float32]]]:
        if not texts or not tokens:
            return self.encode(texts), []
        pooled, vectors = self._calls.encode_with_tokens(list(texts), queries)
        return _matrix(pooled), [_matrix(v) for v in vectors]

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        if not texts:
            return []
        return [_matrix(v) for v in self._calls.token_vectors(list(texts))]


def shared_embedder(calls: EmbedderCalls | None = None) -> SharedEmbedder:
    """The adapter for the model the deployment runs, from its ``info()`` (asked once)."""
    calls = calls if calls is not None else EmbedderCalls()
    info = calls.info()
    adapter = SharedTokenEmbedder if info["late"] else SharedEmbedder
    return adapter(calls, int(info["dim"]), str(info["model_id"]))

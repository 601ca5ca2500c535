"""The shard's adapter over the shared Embedder deployment (``actors.shared_embedder``,
``STRATA_SHARD_EMBEDDING=embedder``), on a handle double that runs the deployment's plain
class (``serve_app.embedder.EmbedderService``) in this process: no Ray cluster."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from ray.exceptions import RayTaskError
from ray.serve.exceptions import DeploymentUnavailableError, RayServeException

from actors.shared_embedder import (
    EmbedderCalls,
    SharedEmbedder,
    SharedTokenEmbedder,
    shared_embedder,
)
from serve_app.embedder import EmbedderService
from strata.errors import EmbedderError, InvalidInput
from strata.recall.late import QueryBatcher, TokenEmbedder, embed_queries
from strata.settings import Settings
from strata.stores.embedders import HashEmbedder, JointEmbedder, WriteEmbedder


class Response:
    """A ``DeploymentResponse``: the result crosses a pickle, as it would a process."""

    def __init__(self, run: Callable[[], Any]) -> None:
        self._run = run

    def result(self, timeout_s: float | None = None) -> Any:
        return pickle.loads(pickle.dumps(self._run()))


class Handle:
    """A ``DeploymentHandle`` double: ``handle.method.remote(*args).result()`` calls the
    service's method; ``calls`` records the method names."""

    def __init__(self, service: Any, fail: Exception | None = None) -> None:
        self._service = service
        self._fail = fail
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._service, name)
        handle = self

        class Method:
            @staticmethod
            def remote(*args: Any) -> Response:
                handle.calls.append(name)

                def run() -> Any:
                    if handle._fail is not None:
                        raise handle._fail
                    return method(*args)
                return Response(run)
        return Method


def service(**settings: Any) -> EmbedderService:
    chosen = {"embedder": "hash", "hash_dim": 32, **settings}
    return EmbedderService(Settings(**chosen).model_dump(mode="json"))


class Lookups:
    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.count = 0

    def __call__(self) -> Any:
        self.count += 1
        return self.handle


def test_the_adapter_gives_the_deployments_vectors_and_looks_the_handle_up_once() -> None:
    handle = Handle(service())
    lookups = Lookups(handle)
    calls = EmbedderCalls(lookups)
    assert lookups.count == 0  # construction is not start-up
    embedder = shared_embedder(calls)
    assert isinstance(embedder, SharedTokenEmbedder)
    assert isinstance(embedder, JointEmbedder) and isinstance(embedder, TokenEmbedder)
    assert (embedder.dim, embedder.model_id) == (32, "hash-ngram-32")
    local = HashEmbedder(32)
    texts = ["I am allergic to peanuts", "the trip costs 40 EUR"]
    np.testing.assert_allclose(embedder.encode(texts), local.encode(texts), rtol=1e-6)
    pooled, tokens = embedder.encode_with_tokens(texts)
    np.testing.assert_allclose(pooled, local.encode(texts), rtol=1e-6)
    for got, want in zip(tokens, local.token_vectors(texts), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert embedder.token_vectors([]) == [] and embedder.encode([]).shape == (0, 32)
    assert lookups.count == 1
    assert handle.calls == ["info", "encode_many", "encode_with_tokens"]


def test_a_write_and_a_query_each_cost_the_shard_one_call() -> None:
    handle = Handle(service())
    shared = shared_embedder(EmbedderCalls(lambda: handle))
    assert isinstance(shared, SharedTokenEmbedder)
    writes = WriteEmbedder(shared)
    handle.calls.clear()
    writes.encode(["my codename is Falcon"])
    writes.token_vectors(["my codename is Falcon"])  # the hot index, right after the write
    assert handle.calls == ["encode_with_tokens"]
    handle.calls.clear()
    batcher = QueryBatcher(lambda texts: embed_queries(writes, texts))
    query = batcher.embed("what is my codename?")
    assert handle.calls == ["encode_with_tokens"]
    assert query.tokens is not None and len(query.vector) == 32


def test_a_model_without_token_vectors_gives_the_pooled_adapter_only() -> None:
    class PooledOnly:
        """The deployment's answers for an embeddings API (no token vectors)."""

        def info(self) -> dict[str, Any]:
            return {"dim": 8, "model_id": "openai:small", "late": False}

        def encode_many(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] + [0.0] * 7 for _ in texts]

    embedder = shared_embedder(EmbedderCalls(lambda: Handle(PooledOnly())))
    assert type(embedder) is SharedEmbedder
    assert not isinstance(embedder, TokenEmbedder) and not isinstance(embedder, JointEmbedder)
    assert embedder.encode(["x"]).shape == (1, 8)
    assert embed_queries(embedder, ["x"])[0].tokens is None


def test_the_deployment_refuses_token_vectors_it_does_not_have() -> None:
    remote_api = service(embedder="openai")  # builds a client; nothing is sent
    with pytest.raises(EmbedderError, match="no token vectors"):
        remote_api.encode_with_tokens(["x"])
    with pytest.raises(EmbedderError, match="no token vectors"):
        remote_api.token_vectors(["x"])


def test_an_app_not_deployed_yet_is_unavailable_and_looked_up_again() -> None:
    handle = Handle(service())
    attempts: list[int] = []

    def lookup() -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise RayServeException("Application 'strata' does not exist")
        return handle

    calls = EmbedderCalls(lookup)
    with pytest.raises(EmbedderError, match="cannot answer now"):
        shared_embedder(calls)
    assert shared_embedder(calls).dim == 32
    assert len(attempts) == 2


@pytest.mark.parametrize("failure", [DeploymentUnavailableError("Embedder"),  # type: ignore[arg-type]
                                     TimeoutError("no answer in 60 s")])
def test_an_embedder_that_cannot_answer_is_an_embedder_error(failure: Exception) -> None:
    calls = EmbedderCalls(lambda: Handle(service(), fail=failure))
    with pytest.raises(EmbedderError, match="cannot answer now") as caught:
        calls.encode(["x"])
    assert caught.value.status_code == 503 and caught.value.__cause__ is failure


def test_a_strata_error_in_the_deployment_comes_out_as_itself() -> None:
    failure = RayTaskError("encode_many", "traceback", InvalidInput("text too long"))
    calls = EmbedderCalls(lambda: Handle(service(), fail=failure))
    with pytest.raises(InvalidInput, match="text too long"):
        calls.encode(["x"])

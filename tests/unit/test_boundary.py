"""The one mapper of Ray's failures (``actors.boundary.strata_errors``)."""

from __future__ import annotations

import pytest
from ray.exceptions import ActorDiedError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

from actors.boundary import strata_errors
from strata.errors import BackendUnavailable, InvalidInput, StrataError


def unavailable(exc: Exception) -> StrataError:
    return BackendUnavailable(f"gone: {type(exc).__name__}")


def task_error(cause: Exception) -> RayTaskError:
    return RayTaskError("method", "traceback", cause)


def test_a_strata_error_raised_on_the_other_side_comes_out_as_itself() -> None:
    with pytest.raises(InvalidInput, match="bad field"), strata_errors(unavailable):
        raise task_error(InvalidInput("bad field"))


@pytest.mark.parametrize("failure", [ActorDiedError(), DeploymentUnavailableError("Embedder"),
                                     BackPressureError(num_queued_requests=9,
                                                       max_queued_requests=8)])
def test_an_unreachable_callee_becomes_the_callers_unavailable_error(
        failure: Exception) -> None:
    with pytest.raises(BackendUnavailable, match="gone") as caught, strata_errors(unavailable):
        raise failure
    assert caught.value.__cause__ is failure


def test_a_bug_on_either_side_is_not_turned_into_unavailable() -> None:
    with pytest.raises(RayTaskError), strata_errors(unavailable):
        raise task_error(KeyError("oops"))
    with pytest.raises(KeyError), strata_errors(unavailable):
        raise KeyError("oops")

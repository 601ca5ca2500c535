"""The one mapper of Ray's failures (``actors.boundary.strata_errors``) and the degraded
answer a recall falls back to (``strata.recall.service.working_only``)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from ray.exceptions import ActorDiedError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

from actors.boundary import strata_errors
from strata.errors import BackendUnavailable, InvalidInput, StrataError
from strata.models import RecallRequest, Turn
from strata.recall.assembly import working_only


def unavailable(exc: Exception) -> StrataError:
    return BackendUnavailable(f"gone: {type(exc).__name__}")


def task_error(cause: Exception) -> RayTaskError:
    return RayTaskError("method", "traceback", cause)


def test_a_strata_error_raised_on_the_other_side_comes_out_as_itself() -> None:
    with pytest.raises(InvalidInput, match="bad field"), strata_errors(unavailable):
        raise task_error(InvalidInput("bad field"))


@pytest.mark.parametrize("failure", [ActorDiedError(), DeploymentUnavailableError("Recall"),
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


def test_working_only_is_the_sessions_working_memory_marked_degraded() -> None:
    request = RecallRequest(user_id="u", query="where was I?", session_id="s")
    turn = Turn(turn_id="t1", session_id="s", user_id="u", role="user",
                content="I am planning a trip to Lisbon",
                created_at=datetime(2026, 1, 1, tzinfo=UTC))
    working = SimpleNamespace(window=[turn], summary="", pinned=[], task_state={})
    answer = working_only(request, working)
    assert answer.degraded and answer.route == "degraded" and answer.layers == ["working"]
    assert "Lisbon" in answer.context and answer.items == []
    alone = working_only(request, None)
    assert alone.degraded and alone.layers == [] and "Lisbon" not in alone.context

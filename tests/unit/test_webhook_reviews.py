"""The author check's SubjectAccessReviews under a busy API server: one review shared by a burst, asked again after a
transient failure while the webhook's time lasts, and the failure raised (the create refused) once it does not."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.webhooks.admission import UserInfo
from trainingjob.webhooks.authorization import Access
from trainingjob.webhooks.component import ApiAccessReviewer, transient

USER = UserInfo(username="alice", uid="1", groups=("team-a",), extra={})


def reviewer(answers: list[object], budget: float) -> tuple[ApiAccessReviewer, list[int]]:
    """A reviewer whose reviews answer `answers` in turn (an exception is raised); the calls are counted."""
    calls = [0]

    async def review(key: str) -> bool:
        calls[0] += 1
        await asyncio.sleep(0.01)
        answer = answers[min(calls[0], len(answers)) - 1]
        if isinstance(answer, BaseException):
            raise answer
        return bool(answer)

    checker = ApiAccessReviewer(client.ApiClient(), budget=budget)
    checker.answers.fetch = review
    return checker, calls


def test_a_burst_shares_one_review_and_a_timed_out_one_is_asked_again() -> None:
    async def burst() -> list[bool]:
        checker, calls = reviewer([TimeoutError(), True], budget=8.0)
        allowed = await asyncio.gather(*(checker.allows(USER, Access("create", "pods", "ns")) for _ in range(200)))
        await checker.authorization.api_client.close()
        assert calls[0] == 2, "one review for the burst, one more after its timeout"
        return allowed

    assert all(asyncio.run(burst()))


def test_a_refusal_or_a_spent_budget_is_not_retried() -> None:
    async def refused() -> None:
        checker, calls = reviewer([ApiException(status=403, reason="Forbidden"), True], budget=8.0)
        with pytest.raises(ApiException):
            await checker.allows(USER, Access("create", "pods", "ns"))
        assert calls[0] == 1, "a 403 is an answer: asking again changes nothing"
        spent, calls = reviewer([TimeoutError(), True], budget=0.0)
        with pytest.raises(TimeoutError):
            await spent.allows(USER, Access("create", "pods", "ns"))
        assert calls[0] == 1
        for used in (checker, spent):
            await used.authorization.api_client.close()

    asyncio.run(refused())


@pytest.mark.parametrize(
    ("error", "expected"),
    [(TimeoutError(), True), (ApiException(status=503), True), (ApiException(status=429), True),
     (ApiException(status=403), False), (ApiException(status=400), False), (ConnectionResetError(), True)],
)  # fmt: skip
def test_what_asking_again_may_mend(error: BaseException, expected: bool) -> None:
    assert transient(error) is expected

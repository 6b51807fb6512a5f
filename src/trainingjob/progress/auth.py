"""Who may report progress for which job: TokenReview with our audience, then the token's pod must be a
worker of that very job (a pod of job A can never write job B) and one allowed to report (worker 0 by default; the
chief 0 in a TensorFlow job with a chief). A pod being deleted still reports: its last report is the checkpoint it
saves on its way out (sdk.on_stop), the one the next attempt resumes from.

"A worker of that job" means controlled by it (an ownerReference with controller=true and the job's uid), not
merely labelled like one: anyone who may create pods in the namespace can copy our labels onto a pod of theirs."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api.constants import CHIEF_ROLES, WORKER
from trainingjob.progress.report import ReportError

AUDIENCE = "trainingjob-progress"
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
REVIEW_TIMEOUT = 10  # seconds: a slow API server must not hold the report's connection


class JobPod(Protocol):
    """What authorizing a report reads of a pod of the job: the operator's cached view of it (a PodView of
    reconcile/observed.py, a layer above this one)."""

    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def controller_uid(self) -> str: ...
    @property
    def deleting(self) -> bool: ...
    @property
    def role(self) -> str: ...
    @property
    def index(self) -> int: ...


@dataclass(frozen=True)
class Caller:
    namespace: str
    pod_name: str
    pod_uid: str


def caller_from_review(status: client.V1TokenReviewStatus | None) -> Caller:
    """The pod behind a reviewed token; 401 unless it is a valid, pod-bound ServiceAccount token for us."""
    if status is None or not status.authenticated:
        raise ReportError(401, f"token rejected: {(status and status.error) or 'not authenticated'}")
    if AUDIENCE not in (status.audiences or []):
        raise ReportError(401, f"token is not for audience {AUDIENCE}")
    user = status.user
    parts = (user.username or "").split(":")
    extra = user.extra or {}
    if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"] or not extra.get(POD_NAME):
        raise ReportError(401, "token must be a ServiceAccount token bound to a pod")
    return Caller(namespace=parts[2], pod_name=extra[POD_NAME][0], pod_uid=(extra.get(POD_UID) or [""])[0])


def authorize(
    caller: Caller, namespace: str, job_uid: str, job_pods: Iterable[JobPod], reporters: Collection[int]
) -> JobPod:
    """The caller's pod among the job's workers (by name and uid, controlled by the job), allowed to report; 403
    otherwise."""
    if caller.namespace != namespace:
        raise ReportError(403, "the token's pod is not in this job's namespace")
    job_pods = list(job_pods)
    pod = next(
        (p for p in job_pods if p.name == caller.pod_name and (not caller.pod_uid or p.uid == caller.pod_uid)), None
    )
    if pod is None:
        raise ReportError(403, f"pod {caller.pod_name} is not a worker of this job")
    if not job_uid or pod.controller_uid != job_uid:
        raise ReportError(403, f"pod {caller.pod_name} is not controlled by this job")
    role = reporting_role(job_pods)
    if pod.role != role or pod.index not in reporters:
        allowed = ", ".join(f"{role} {index}" for index in sorted(reporters))
        raise ReportError(403, f"{pod.role} {pod.index} may not report progress (allowed: {allowed})")
    return pod


def reporting_role(job_pods: Iterable[JobPod]) -> str:
    """Whose reports count: a chief role's (TensorFlow's chief, which runs the training loop) when the job has one,
    else the workers'."""
    roles = {p.role for p in job_pods}
    return next((role for role in CHIEF_ROLES if role in roles), WORKER)


async def review_token(api: client.ApiClient, token: str) -> client.V1TokenReviewStatus | None:
    review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=[AUDIENCE]))
    try:
        result = await client.AuthenticationV1Api(api).create_token_review(review, _request_timeout=REVIEW_TIMEOUT)
    except ApiException as error:
        raise ReportError(503, f"cannot review the token now: {error.reason}", retry_after=5) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        raise ReportError(503, f"cannot review the token now: {error!r}", retry_after=5) from None
    return result.status

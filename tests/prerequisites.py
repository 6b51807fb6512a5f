"""What a test needs that `make test` installs: missing is a failure with one line saying how to get it, never a skip.

`make test` builds and installs every prerequisite before pytest starts (issue 42: a fresh machine once skipped the
whole UI because Chromium was missing, while CI, which installed it separately, stayed green). The quick targets that
deliberately build less (`make test-unit` builds no tools) set TJ_PREREQUISITES=optional, and only there does a
missing prerequisite skip the test, with the same line as its reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest


def missing_prerequisite(message: str) -> None:
    """Fail (or, in a run that deliberately builds less, skip) because `message`'s prerequisite is missing."""
    if os.environ.get("TJ_PREREQUISITES", "").lower() == "optional":
        pytest.skip(message)
    pytest.fail(f"{message} (make test installs it)", pytrace=False)


def component_on_cluster(binary: Any, hint: str, ensure_running: Callable[..., None], tests: str) -> Any:
    """A component (SeaweedFS, Kueue) running on the session's cluster, started if it does not run: its binary
    missing is a missing prerequisite; the cluster's ClusterState. `tests` names the tests for the message when
    TJ_USE_EXISTING_CLUSTER gives no local cluster to start it on."""
    from tests.conftest import TEST_CLUSTER_NAME
    from trainingjob.cluster.build import is_built
    from trainingjob.cluster.control_plane import ClusterState

    if not is_built(binary):
        missing_prerequisite(hint)
    state = ClusterState.load(TEST_CLUSTER_NAME)
    if state is None:
        pytest.fail(f"{tests} on this checkout's local cluster; TJ_USE_EXISTING_CLUSTER has none")
    ensure_running(state, say=lambda _: None)
    return state

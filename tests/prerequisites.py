"""What a test needs that `make test` installs: missing is a failure with one line saying how to get it, never a skip.

`make test` builds and installs every prerequisite before pytest starts (issue 42: a fresh machine once skipped the
whole UI because Chromium was missing, while CI, which installed it separately, stayed green). The quick targets that
deliberately build less (`make test-unit` builds no tools) set TJ_PREREQUISITES=optional, and only there does a
missing prerequisite skip the test, with the same line as its reason.
"""

from __future__ import annotations

import os

import pytest


def missing_prerequisite(message: str) -> None:
    """Fail (or, in a run that deliberately builds less, skip) because `message`'s prerequisite is missing."""
    if os.environ.get("TJ_PREREQUISITES", "").lower() == "optional":
        pytest.skip(message)
    pytest.fail(f"{message} (make test installs it)", pytrace=False)

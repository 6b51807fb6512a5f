"""Fixtures shared by several integration test modules, registered once (a session-scoped fixture imported into
two modules would be set up twice, and Playwright's sync API cannot run twice at once)."""

from tests.control_plane_faults import faulted_operator, restored_control_plane
from tests.integration.ui_support import admin_ui, browser, other_origin, page
from tests.kueue_support import kueue, kueue_operator, queues
from tests.s3_support import s3_credentials, s3_server
from tests.spec_fuzz_support import world

__all__ = [
    "admin_ui",
    "browser",
    "faulted_operator",
    "kueue",
    "kueue_operator",
    "other_origin",
    "page",
    "queues",
    "restored_control_plane",
    "s3_credentials",
    "s3_server",
    "world",
]

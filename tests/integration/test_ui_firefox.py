"""`tj ui` in a second browser engine (issue 41): Debian's Firefox ESR, driven over WebDriver BiDi by Puppeteer's core
(tests/browser/ui_firefox.mjs), against the real cluster, the session's operator and `tj ui`.

Every other browser test runs Chromium (Blink, V8). An escaping that holds in one engine could fail in another
(how each parses markup, runs handlers of elements never inserted, applies the CSP), so the hostile strings of
test_ui_attacks.py are shown to Gecko too: a job whose spec carries markup and an Event whose message is markup must
show as text on the job page, with no dialog, no payload flag set and no element of the payload in the DOM. The
page's CSP stays on here (Firefox's BiDi cannot bypass it); the DOM count catches markup parsed even where the CSP
would stop its script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_ui_attacks import PAYLOAD, hostile_event
from tests.integration.ui_support import UI_TIMEOUT_MS, RunningUi
from tests.jobs import create_job, job_manifest, wait_phase
from tests.kube import Kube
from tests.operator_harness import REPO
from tests.prerequisites import missing_prerequisite

pytestmark = pytest.mark.integration
DRIVER = REPO / "tests" / "browser" / "ui_firefox.mjs"
FIREFOX = Path(os.environ.get("TJ_FIREFOX", "/usr/bin/firefox-esr"))


def driver_command() -> list[str]:
    """node and the driver script; a missing Firefox, Node.js or Puppeteer is a missing prerequisite."""
    node = shutil.which("node")
    if node is None:
        missing_prerequisite("Node.js (node) not found")
    if not FIREFOX.exists():
        missing_prerequisite(f"{FIREFOX} not found: apt-get install firefox-esr (or set TJ_FIREFOX)")
    if not (DRIVER.parent / "node_modules" / "puppeteer-core").is_dir():
        missing_prerequisite("Puppeteer (core) is not installed: make browser-tools")
    return [str(node), str(DRIVER)]


def run_firefox(plan: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """What Firefox saw on the plan's pages (ui_firefox.mjs's one JSON line)."""
    command = driver_command()
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    environment = {**os.environ, "TJ_FIREFOX": str(FIREFOX), "TJ_UI_TIMEOUT_MS": str(UI_TIMEOUT_MS)}
    done = subprocess.run(
        [*command, str(plan_path)], capture_output=True, text=True, timeout=300, env=environment, cwd=DRIVER.parent
    )
    assert done.returncode == 0, f"the Firefox driver exited with {done.returncode}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_hostile_strings_are_text_in_firefox_too(
    admin_ui: RunningUi, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    job = create_job(kube, namespace, job_manifest("hostile", complete_after=None, hyperparameters={"note": PAYLOAD}))
    wait_phase(kube, namespace, "hostile", "Running")
    hostile_event(kube, namespace, job, PAYLOAD)
    page = f"#/jobs/{namespace}/hostile"
    plan = {
        "loginUrl": admin_ui.login_url,
        "checks": [
            {"hash": page, "testid": "spec", "text": f'"note": "{PAYLOAD}"'},
            {"hash": page, "testid": "events-table", "text": PAYLOAD},
        ],
    }
    seen = run_firefox(plan, tmp_path)

    assert seen["version"].startswith("firefox/"), seen
    assert seen["parsed"] == 0, f"a payload was parsed as HTML in Firefox: {seen}"
    assert seen["dialogs"] == [], f"the page opened dialogs in Firefox: {seen}"
    assert seen["pwned"] == 0, f"a payload's script ran in Firefox: {seen}"
    assert seen["signedIn"]["shown"], seen
    assert [c for c in seen["checks"] if not c["shown"]] == [], seen

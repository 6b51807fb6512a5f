"""Actions in `tj ui`, clicked in headless Chromium against the real cluster: each asks for confirmation, does
what it says on the API server, and shows the API server's error verbatim when it refuses (validation, RBAC)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from playwright.sync_api import expect

from tests.integration.ui_support import (
    UI_TIMEOUT_MS,
    RunningUi,
    restricted_kubeconfig,
    screenshot,
    start_ui,
    wait_for_job,
)
from tests.jobs import create_job, get_job, job_manifest, patch_job, wait_phase
from tests.kube import Kube, wait_until
from trainingjob.api import constants as k

pytestmark = pytest.mark.integration


def open_job(page: Any, ui: RunningUi, namespace: str, name: str) -> None:
    page.goto(f"{ui.base}/#/jobs/{namespace}/{name}")
    expect(page.get_by_test_id("summary")).to_be_visible()


def confirm(page: Any, expected_text: str) -> None:
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(expected_text)
    page.get_by_test_id("confirm-ok").click()


def api_refusal(call: Any) -> str:
    with pytest.raises(ApiException) as refused:
        call()
    body = refused.value.body
    return json.loads(body.decode() if isinstance(body, bytes) else body)["message"]


def test_suspend_then_resume(page: Any, admin_ui: RunningUi, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("pause", workers=2, complete_after=None))
    wait_phase(kube, namespace, "pause", "Running")
    open_job(page, admin_ui, namespace, "pause")

    page.get_by_test_id("suspend").click()
    confirm(page, f"Suspend {namespace}/pause?")
    expect(page.get_by_test_id("action-ok")).to_have_text("suspend requested")
    expect(page.get_by_test_id("summary").get_by_test_id("phase")).to_have_text("Suspended")
    assert get_job(kube, namespace, "pause")["spec"]["suspend"] is True

    page.get_by_test_id("resume").click()
    confirm(page, f"Resume {namespace}/pause?")
    expect(page.get_by_test_id("summary").get_by_test_id("phase")).to_have_text("Running")
    assert get_job(kube, namespace, "pause")["spec"]["suspend"] is False


def test_cancel_leaves_the_job_alone(page: Any, admin_ui: RunningUi, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("keep", complete_after=None))
    open_job(page, admin_ui, namespace, "keep")
    page.get_by_test_id("delete").click()
    page.get_by_test_id("confirm-cancel").click()
    expect(page.get_by_test_id("confirm-dialog")).to_be_hidden()
    assert get_job(kube, namespace, "keep") is not None
    expect(page.get_by_test_id("result")).to_be_empty()


def test_scale_through_the_scale_subresource(page: Any, admin_ui: RunningUi, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("grow", workers=2, complete_after=None))
    wait_phase(kube, namespace, "grow", "Running")
    open_job(page, admin_ui, namespace, "grow")
    page.get_by_test_id("scale-input").fill("3")
    page.get_by_test_id("scale").click()
    confirm(page, "to 3 worker(s)?")
    expect(page.get_by_test_id("action-ok")).to_have_text("scaled to 3")
    wait_for_job(kube, namespace, "grow", lambda job: job["spec"]["workers"] == 3, "spec.workers to be 3")
    expect(page.get_by_test_id("job-workers")).to_have_text("3 running / 3 wanted")


def test_an_update_of_the_job_keeps_what_was_typed_into_the_scale_box(
    page: Any, admin_ui: RunningUi, kube: Kube, namespace: str
) -> None:
    """The page re-renders the job on every change of it (progress, status): the scale box must survive that."""
    create_job(kube, namespace, job_manifest("typing", complete_after=None))
    wait_phase(kube, namespace, "typing", "Running")
    open_job(page, admin_ui, namespace, "typing")
    box = page.get_by_test_id("scale-input")
    box.fill("4")
    patch_job(kube, namespace, "typing", {"spec": {"ttlSecondsAfterFinished": 4321}})
    expect(page.get_by_test_id("spec")).to_contain_text("4321")  # the page has the changed job
    expect(box).to_have_value("4")
    expect(box).to_be_focused()
    page.get_by_test_id("scale").click()
    confirm(page, "to 4 worker(s)?")
    expect(page.get_by_test_id("action-ok")).to_have_text("scaled to 4")
    wait_for_job(kube, namespace, "typing", lambda job: job["spec"]["workers"] == 4, "spec.workers to be 4")


def test_scale_refused_by_the_schema_shows_its_message(
    page: Any, admin_ui: RunningUi, kube: Kube, namespace: str
) -> None:
    create_job(kube, namespace, job_manifest("zero", complete_after=None))
    open_job(page, admin_ui, namespace, "zero")
    expected = api_refusal(
        lambda: kube.custom.patch_namespaced_custom_object_scale(
            "ml.example.com", "v1alpha1", namespace, "trainingjobs", "zero", {"spec": {"replicas": 0}}
        )
    )
    page.get_by_test_id("scale-input").fill("0")
    page.get_by_test_id("scale").click()
    confirm(page, "to 0 worker(s)?")
    error = page.get_by_test_id("action-error")
    expect(error).to_contain_text("422 Invalid")
    expect(error).to_contain_text(expected)
    # Beside the button that caused it, not below the job's summary.
    expect(
        page.locator("div.actions", has=page.get_by_test_id("delete")).get_by_test_id("action-error")
    ).to_be_visible()


def test_delete_removes_the_job_and_its_row(page: Any, admin_ui: RunningUi, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("gone", complete_after=None))
    expect(page.locator(f'tr[data-job="{namespace}/gone"]')).to_have_count(1)
    page.locator(f'tr[data-job="{namespace}/gone"] a').click()
    page.get_by_test_id("delete").click()
    confirm(page, f"Delete {namespace}/gone?")
    expect(page.get_by_test_id("gone")).to_have_text("This job has been deleted.")
    wait_for_job(kube, namespace, "gone", lambda job: job is None, "the job to be deleted")
    page.goto(admin_ui.base + "/#/")
    expect(page.get_by_test_id("scope")).to_contain_text("all namespaces")  # listed (a table only if jobs are left)
    expect(page.locator(f'tr[data-job="{namespace}/gone"]')).to_have_count(0)


def test_submit_from_yaml(page: Any, admin_ui: RunningUi, kube: Kube, namespace: str) -> None:
    page.get_by_test_id("nav-submit").click()
    manifest = {**job_manifest("fromyaml", workers=2, complete_after=None), "metadata": {"name": "fromyaml"}}
    manifest["metadata"]["namespace"] = namespace
    page.get_by_test_id("yaml").fill(yaml.safe_dump(manifest, sort_keys=False))
    screenshot(page, "ui-submit")
    page.get_by_test_id("submit-yaml").click()
    confirm(page, "Create this TrainingJob?")
    expect(page.get_by_test_id("action-ok")).to_have_text(f"created {namespace}/fromyaml")
    assert get_job(kube, namespace, "fromyaml")["spec"]["workers"] == 2
    page.get_by_test_id("created-link").click()
    expect(page.get_by_test_id("summary").get_by_test_id("phase")).to_have_text("Running")


def test_submit_from_the_form(page: Any, admin_ui: RunningUi, kube: Kube, namespace: str) -> None:
    page.get_by_test_id("nav-submit").click()
    page.get_by_test_id("tab-form").click()
    page.get_by_test_id("form-name").fill("fromform")
    page.get_by_test_id("form-namespace").fill(namespace)
    page.get_by_test_id("form-framework").select_option("jax")
    page.get_by_test_id("form-workers").fill("3")
    page.get_by_test_id("form-gpus").fill("1")
    page.get_by_test_id("submit-form").click()
    confirm(page, "framework: jax")
    expect(page.get_by_test_id("action-ok")).to_have_text(f"created {namespace}/fromform")
    spec = get_job(kube, namespace, "fromform")["spec"]
    assert (spec["framework"], spec["workers"], spec["gpuPerWorker"]) == ("jax", 3, 1)


@pytest.fixture
def form_runtime(kube: Kube) -> Iterator[str]:
    """A ClusterTrainingRuntime for the form to name (its image and command; the job gives neither)."""
    name = f"ui-rt-{uuid.uuid4().hex[:8]}"
    template = {"image": "registry.example/runtime-image:1", "command": ["python", "train.py"]}
    body = {
        "apiVersion": k.RUNTIME_API_VERSION,
        "kind": k.CLUSTER_RUNTIME_KIND,
        "metadata": {"name": name},
        "spec": {"framework": "pytorch", "template": template},
    }
    kube.custom.create_cluster_custom_object(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, body)
    yield name
    kube.custom.delete_cluster_custom_object(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, name)


def test_submit_from_the_form_with_a_runtime(
    page: Any, admin_ui: RunningUi, kube: Kube, namespace: str, form_runtime: str
) -> None:
    """Image and command left empty: the job names the runtime, and the operator builds it from the runtime's."""
    page.get_by_test_id("nav-submit").click()
    page.get_by_test_id("tab-form").click()
    page.get_by_test_id("form-name").fill("fromruntime")
    page.get_by_test_id("form-namespace").fill(namespace)
    page.get_by_test_id("form-framework").select_option("pytorch")
    page.get_by_test_id("form-runtime").fill(form_runtime)
    page.get_by_test_id("form-image").fill("")
    page.get_by_test_id("form-command").fill("")
    page.get_by_test_id("submit-form").click()
    confirm(page, f'runtimeRef: {{name: "{form_runtime}"}}')
    expect(page.get_by_test_id("action-ok")).to_have_text(f"created {namespace}/fromruntime")
    spec = get_job(kube, namespace, "fromruntime")["spec"]
    assert spec["runtimeRef"]["name"] == form_runtime and "image" not in spec and "command" not in spec
    recorded = wait_until(
        lambda: (get_job(kube, namespace, "fromruntime").get("status") or {}).get("runtime"),
        60,
        "the operator to record the runtime the job starts from",
    )
    assert recorded["template"]["image"] == "registry.example/runtime-image:1"


def test_submit_refused_by_the_api_server_shows_its_message(
    page: Any, admin_ui: RunningUi, kube: Kube, namespace: str
) -> None:
    manifest = job_manifest("bad", complete_after=None, workers=0)
    manifest["metadata"]["namespace"] = namespace
    expected = api_refusal(lambda: create_job(kube, namespace, manifest))
    page.get_by_test_id("nav-submit").click()
    page.get_by_test_id("yaml").fill(json.dumps(manifest))
    page.get_by_test_id("submit-yaml").click()
    confirm(page, "Create this TrainingJob?")
    error = page.get_by_test_id("action-error")
    expect(error).to_contain_text("422 Invalid")
    expect(error).to_contain_text(expected)


@pytest.fixture
def viewer_ui(
    cluster: Any, kube: Kube, namespace: str, operator: Any, tmp_path: Path
) -> Iterator[tuple[RunningUi, str]]:
    """`tj ui` run by a user who may only read TrainingJobs of one namespace."""
    kubeconfig, user = restricted_kubeconfig(kube, namespace, tmp_path / "viewer.kubeconfig", ["get", "list", "watch"])
    running = start_ui(kubeconfig, tmp_path)
    yield running, user
    running.stop()


def test_rbac_denied_action_is_shown_with_the_api_servers_words(
    browser: Any, viewer_ui: tuple[RunningUi, str], kube: Kube, namespace: str
) -> None:
    ui, user = viewer_ui
    create_job(kube, namespace, job_manifest("locked", complete_after=None))
    viewer = kube.with_token(restricted_token(ui))
    expected = api_refusal(
        lambda: viewer.custom.delete_namespaced_custom_object(
            "ml.example.com", "v1alpha1", namespace, "trainingjobs", "locked"
        )
    )
    assert user in expected and "cannot delete" in expected

    context = browser.new_context(viewport={"width": 1360, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        page.goto(ui.login_url)
        expect(page.get_by_test_id("identity")).to_contain_text(user)
        # This user may not list jobs in all namespaces: the UI falls back to the context's namespace.
        expect(page.get_by_test_id("scope")).to_contain_text(f"namespace {namespace}")
        page.locator(f'tr[data-job="{namespace}/locked"] a').click()
        page.get_by_test_id("delete").click()
        confirm(page, f"Delete {namespace}/locked?")
        error = page.get_by_test_id("action-error")
        expect(error).to_have_text(f"403 Forbidden: {expected}")
        screenshot(page, "ui-forbidden")
        page.get_by_test_id("suspend").click()
        confirm(page, "Suspend")
        expect(page.get_by_test_id("action-error")).to_contain_text(f'User "{user}" cannot patch resource')
    finally:
        context.close()
    # What the page offers no button for here is refused the same way through the UI's API: the UI acts with its
    # user's credentials, never with more.
    job, write = f"/api/namespaces/{namespace}/trainingjobs/locked", {"X-TJ-UI": "1"}
    status, body = ui.request(f"{job}/scale", "POST", write, {"workers": 3})
    assert status == 403 and f'User "{user}" cannot' in body["message"], (status, body)
    manifest = json.dumps(job_manifest("smuggled") | {"metadata": {"name": "smuggled", "namespace": namespace}})
    status, body = ui.request("/api/trainingjobs", "POST", write, {"manifest": manifest})
    assert status == 403 and f'User "{user}" cannot create' in body["message"], (status, body)
    assert get_job(kube, namespace, "smuggled") is None
    locked = get_job(kube, namespace, "locked")
    assert locked["spec"].get("suspend") in (None, False) and locked["spec"]["workers"] == 1


def restricted_token(ui: RunningUi) -> str:
    kubeconfig = ui.process.args[ui.process.args.index("--kubeconfig") + 1]
    return yaml.safe_load(Path(kubeconfig).read_text())["users"][0]["user"]["token"]

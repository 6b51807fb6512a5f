"""`tj ui` attacked in a real browser (headless Chromium) against the real cluster and operator (issue 41).

What is proven elsewhere and not repeated: the token is not a cookie and another local port's page gets neither it
nor a way to act with a plain no-cors POST (test_ui_token.py); token, foreign Host header and the X-TJ-UI header on
plain HTTP (test_ui_server.py); malformed bodies and hostile names in the path (test_endpoint_abuse.py); a user whose
RBAC forbids an action sees the API server's refusal (test_ui_actions.py).

Here: strings carrying HTML and script, written where a tenant, a worker or another controller can write them, are
shown as text and never run; a page on another local origin that knows everything but cannot set the UI's headers
changes nothing; the UI cannot be framed, and every response (errors included) says so and forbids sniffing.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.integration.test_progress_endpoint import pod_token, post, worker_ca
from tests.integration.ui_support import UI_TIMEOUT_MS, OtherOrigin, RunningUi, process_node_job
from tests.jobs import SIM, create_job, get_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator
from trainingjob.api import constants as k

pytestmark = pytest.mark.integration

# Markup that runs script if it is ever parsed as HTML: an image whose error handler sets a flag and opens a dialog,
# a script element, and an element the page never makes (found in the DOM = parsed). No double quote or backslash,
# so JSON shows it unchanged.
PAYLOAD = "<img src=x onerror=window.__pwned=1;alert(1)><script>window.__pwned=2;alert(2)</script><b data-pwned=1>b</b>"
# Text that would end the UI server's event-stream record and start one of its own, were it written raw.
SSE_BREAK = "\n\nevent: {}\ndata: {{}}\n\n"
WATCH = """
window.__pwned = 0;
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective));
"""


def traps(page: Any) -> list[str]:
    """Dialogs the page opened (dismissed at once, recorded)."""
    dialogs: list[str] = []

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    return dialogs


def assert_nothing_ran(page: Any, dialogs: list[str]) -> None:
    assert dialogs == [], f"the page opened dialogs: {dialogs}"
    assert page.evaluate("window.__pwned") == 0, "a payload's script ran"
    parsed = page.evaluate("document.querySelectorAll('[data-pwned], img, script:not([src])').length")
    assert parsed == 0, "a payload was parsed as HTML"


@pytest.fixture
def hostile_page(browser: Any, admin_ui: RunningUi) -> Iterator[tuple[Any, list[str]]]:
    """A signed-in page whose own CSP is switched off (bypass_csp): escaping alone must keep the payloads inert, the
    CSP is a second wall (checked below), not the one these tests lean on."""
    context = browser.new_context(bypass_csp=True, viewport={"width": 1360, "height": 900})
    context.add_init_script(WATCH)
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    dialogs = traps(page)
    page.goto(admin_ui.login_url)
    expect(page.get_by_test_id("identity")).to_contain_text("acting as")
    yield page, dialogs
    context.close()


def hostile_event(kube: Kube, namespace: str, job: dict[str, Any], message: str) -> None:
    """A core Event on the job, as any controller (or a tenant allowed to create Events) can write one."""
    meta = job["metadata"]
    involved = {"apiVersion": k.API_VERSION, "kind": k.KIND, "name": meta["name"], "namespace": namespace}
    event = {
        "metadata": {"generateName": "hostile-"},
        "involvedObject": {**involved, "uid": meta["uid"]},
        "type": "Warning",
        "reason": "Hostile",
        "message": message,
        "source": {"component": "attacker"},
        "count": 1,
    }
    kube.core.create_namespaced_event(namespace, event)


def test_hostile_strings_are_shown_as_text_and_never_run(
    hostile_page: tuple[Any, list[str]],
    admin_ui: RunningUi,
    kube: Kube,
    namespace: str,
    operator: RunningOperator,
) -> None:
    page, dialogs = hostile_page
    manifest = job_manifest("hostile", complete_after=None, hyperparameters={"note": PAYLOAD})
    manifest["spec"]["podAnnotations"] = {"example.com/note": PAYLOAD}
    manifest["metadata"]["annotations"] = {"example.com/note": PAYLOAD}  # the UI does not show these: no harm either
    job = create_job(kube, namespace, manifest)
    # A worker that cannot start, with the kubelet's message (what an image name or a CSI driver can put there):
    # it becomes the job's Blocked condition and status.message.
    blocked = job_manifest("blocked", complete_after=None)
    blocked["spec"]["podAnnotations"] = {f"{SIM}/waiting-reason": "CreateContainerConfigError"}
    blocked["spec"]["podAnnotations"][f"{SIM}/waiting-message"] = PAYLOAD
    create_job(kube, namespace, blocked)
    wait_phase(kube, namespace, "hostile", "Running")
    hostile_event(kube, namespace, job, PAYLOAD)
    hostile_event(kube, namespace, job, f"before{SSE_BREAK.format('deleted')}after")

    # Worker 0 through the real progress endpoint: metric names that are markup are refused (the name pattern), a
    # string value too; a checkpoint path is free text (no control characters) and is stored as it came.
    context, token = worker_ca(kube, namespace, "hostile"), pod_token(kube, namespace, "hostile-worker-0")
    for metrics in ({PAYLOAD: 1.0}, {"loss": PAYLOAD}):
        status, answer = post(operator, context, namespace, "hostile", token, json.dumps({"metrics": metrics}).encode())
        assert status == 400, (metrics, status, answer)
    report = {"epoch": 1, "totalEpochs": 4, "metrics": {"loss": 0.5}, "checkpoint": {"epoch": 1, "path": PAYLOAD}}
    assert post(operator, context, namespace, "hostile", token, json.dumps(report).encode())[0] == 202

    expect(page.locator(f'tr[data-job="{namespace}/hostile"]')).to_have_count(1, timeout=UI_TIMEOUT_MS)
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/hostile")
    expect(page.get_by_test_id("checkpoints-table")).to_contain_text(PAYLOAD, timeout=UI_TIMEOUT_MS)
    expect(page.get_by_test_id("events-table")).to_contain_text(PAYLOAD, timeout=UI_TIMEOUT_MS)
    expect(page.get_by_test_id("events-table")).to_contain_text("event: deleted")
    expect(page.get_by_test_id("gone")).to_have_count(0)  # the message did not end the page's event stream
    expect(page.get_by_test_id("spec")).to_contain_text(f'"note": "{PAYLOAD}"')
    expect(page.get_by_test_id("spec")).to_contain_text(f'"example.com/note": "{PAYLOAD}"')
    expect(page.get_by_test_id("summary")).to_contain_text("loss=0.5")
    assert PAYLOAD not in page.get_by_test_id("summary").inner_text(), "a refused metric name got through"
    assert_nothing_ran(page, dialogs)

    wait_until(
        lambda: PAYLOAD in str((get_job(kube, namespace, "blocked") or {}).get("status", {}).get("conditions")),
        60,
        "the kubelet's message in the blocked job's conditions",
    )
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/blocked")
    expect(page.get_by_test_id("conditions-table")).to_contain_text(PAYLOAD, timeout=UI_TIMEOUT_MS)
    expect(page.get_by_test_id("summary")).to_contain_text(PAYLOAD)  # status.message
    assert_nothing_ran(page, dialogs)

    # A refusal echoes what was submitted: the API server's (a name that is markup) and the UI server's (a kind).
    named = job_manifest("x") | {"metadata": {"name": PAYLOAD, "namespace": namespace}}
    for manifest, error in ((named, "422 Invalid"), ({"apiVersion": named["apiVersion"], "kind": PAYLOAD}, "400")):
        page.goto(f"{admin_ui.base}/#/submit")
        page.get_by_test_id("yaml").fill(json.dumps(manifest))
        page.get_by_test_id("submit-yaml").click()
        expect(page.get_by_test_id("confirm-dialog")).to_be_visible()
        page.get_by_test_id("confirm-ok").click()
        expect(page.get_by_test_id("action-error")).to_contain_text(error)
        expect(page.get_by_test_id("action-error")).to_contain_text(PAYLOAD)
    assert_nothing_ran(page, dialogs)


def test_a_hostile_log_line_is_shown_as_text(
    hostile_page: tuple[Any, list[str]], admin_ui: RunningUi, kube: Kube, namespace: str
) -> None:
    """A worker's own output, streamed from a worker that really runs (kwok serves no logs)."""
    page, dialogs = hostile_page
    lines = [PAYLOAD, SSE_BREAK.format("end"), "after the break"]
    script = f"import time\nprint({chr(10).join(lines)!r}, flush=True)\ntime.sleep(600)\n"
    create_job(kube, namespace, process_node_job(kube, "printer", script))
    wait_phase(kube, namespace, "printer", "Running", timeout=120)
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/printer")
    page.get_by_test_id("log-show").click()
    expect(page.get_by_test_id("log-output")).to_contain_text(PAYLOAD, timeout=UI_TIMEOUT_MS)
    expect(page.get_by_test_id("log-output")).to_contain_text("after the break")
    expect(page.get_by_test_id("log-state")).to_have_text("streaming the log of printer-worker-0…")  # not ended
    assert_nothing_ran(page, dialogs)


def test_the_csp_stops_markup_that_got_into_the_page(browser: Any, admin_ui: RunningUi) -> None:
    """The second wall, in the browser: were a bug to put markup into the page (done here by the page itself), its
    inline handler and inline script are blocked and reported, not run."""
    context = browser.new_context()
    context.add_init_script(WATCH)
    try:
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        dialogs = traps(page)
        page.goto(admin_ui.login_url)
        expect(page.get_by_test_id("identity")).to_contain_text("acting as")
        page.evaluate(
            """(markup) => {
                document.getElementById("main").insertAdjacentHTML("beforeend", markup);
                const script = document.createElement("script");
                script.textContent = "window.__pwned = 3";
                document.body.append(script);
            }""",
            PAYLOAD,
        )
        page.wait_for_function("() => window.__violations.length >= 2")
        assert dialogs == [] and page.evaluate("window.__pwned") == 0
        assert set(page.evaluate("window.__violations")) <= {"script-src-attr", "script-src-elem"}
    finally:
        context.close()


# Run in the other origin's page: every way a script there can send a changing request to the UI, with the real
# token (the worst case: it leaked) and without. Each answer is what the script gets to see.
CROSS_SITE = """async ([job, token]) => {
    const tries = {
        "POST suspend, cors, token + X-TJ-UI": [job + "/suspend", {method: "POST", mode: "cors",
            headers: {"Authorization": "Bearer " + token, "X-TJ-UI": "1", "Content-Type": "application/json"},
            body: '{"suspend": true}'}],
        "POST suspend, cors, X-TJ-UI only": [job + "/suspend", {method: "POST", mode: "cors", credentials: "include",
            headers: {"X-TJ-UI": "1", "Content-Type": "application/json"}, body: '{"suspend": true}'}],
        "POST scale, no-cors, simple": [job + "/scale", {method: "POST", mode: "no-cors", credentials: "include",
            headers: {"Content-Type": "text/plain"}, body: '{"workers": 3}'}],
        "DELETE, cors, token + X-TJ-UI": [job, {method: "DELETE", mode: "cors",
            headers: {"Authorization": "Bearer " + token, "X-TJ-UI": "1"}}],
        "DELETE, no-cors": [job, {method: "DELETE", mode: "no-cors", credentials: "include"}],
        "PATCH, cors, token + X-TJ-UI": [job, {method: "PATCH", mode: "cors",
            headers: {"Authorization": "Bearer " + token, "X-TJ-UI": "1",
                      "Content-Type": "application/merge-patch+json"}, body: '{"spec": {"suspend": true}}'}],
        "PATCH, no-cors": [job, {method: "PATCH", mode: "no-cors", body: '{"spec": {"suspend": true}}'}],
        "GET whoami, cors, token": [location.search.slice(1) + "/api/whoami", {mode: "cors",
            headers: {"Authorization": "Bearer " + token}}],
    };
    const seen = {};
    for (const [name, [url, options]] of Object.entries(tries)) {
        try {
            const response = await fetch(url, options);
            seen[name] = response.type === "opaque" ? "opaque" : `read ${response.status}: ${await response.text()}`;
        } catch (error) {
            seen[name] = `refused: ${error.name}`;
        }
    }
    return seen;
}"""


def form_page(target: str, fields: str) -> str:
    """A page that posts a form to the UI as soon as it loads (into a frame of its own, to stay on the page)."""
    return (
        f'<!doctype html><iframe name="sink"></iframe><form id="f" method="post" enctype="text/plain" target="sink"'
        f' action="{target}">{fields}</form><script>document.getElementById("f").submit()</script>'
    )


def test_another_origin_changes_nothing_even_with_the_token(
    browser: Any, admin_ui: RunningUi, other_origin: str, kube: Kube, namespace: str
) -> None:
    create_job(kube, namespace, job_manifest("target", workers=2, complete_after=None))
    before = wait_phase(kube, namespace, "target", "Running")
    job = f"{admin_ui.base}/api/namespaces/{namespace}/trainingjobs/target"
    # A text/plain form body that reads as JSON: {"suspend": true, "x": "="} (a form cannot send headers).
    suspend_field = '<input name=\'{"suspend": true, "x": "\' value=\'"}\'>'
    manifest = json.dumps(job_manifest("planted") | {"metadata": {"name": "planted", "namespace": namespace}})
    create_field = f'<input name=\'{{"manifest": {json.dumps(manifest)}, "x": "\' value=\'"}}\'>'
    OtherOrigin.pages = {
        "/suspend-form": form_page(f"{job}/suspend", suspend_field),
        "/create-form": form_page(f"{admin_ui.base}/api/trainingjobs", create_field),
    }
    context = browser.new_context()
    try:
        ui = context.new_page()  # the user's signed-in UI tab, open beside the attacker's
        ui.set_default_timeout(UI_TIMEOUT_MS)
        ui.goto(admin_ui.login_url)
        expect(ui.get_by_test_id("identity")).to_contain_text("acting as")
        attacker = context.new_page()
        attacker.set_default_timeout(UI_TIMEOUT_MS)
        attacker.goto(f"{other_origin}/?{admin_ui.base}")
        seen = attacker.evaluate(CROSS_SITE, [job, admin_ui.token])
        forms = {}
        for name in ("suspend-form", "create-form"):
            sent = attacker.expect_response(lambda r: r.request.method == "POST" and r.url.startswith(admin_ui.base))
            with sent as answer:
                attacker.goto(f"{other_origin}/{name}")
            forms[name] = answer.value.status
    finally:
        context.close()
    assert forms == {"suspend-form": 401, "create-form": 401}, forms  # a form carries no token
    assert all(answer in ("opaque", "refused: TypeError") for answer in seen.values()), seen
    # Every try with the token or the X-TJ-UI header needs a preflight, which the UI never grants: not even sent.
    assert {name for name, answer in seen.items() if answer == "opaque"} == {"POST scale, no-cors, simple"}, seen
    after = get_job(kube, namespace, "target")
    assert after is not None, "the job was deleted"
    assert after["metadata"]["generation"] == before["metadata"]["generation"], after["spec"]
    assert not after["spec"].get("suspend") and after["spec"]["workers"] == 2
    assert get_job(kube, namespace, "planted") is None, "a form created a job"


PREFLIGHT = {
    "Origin": "http://127.0.0.1:1",
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization,x-tj-ui",
}
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}


def test_every_answer_forbids_framing_and_sniffing(admin_ui: RunningUi, namespace: str) -> None:
    """Errors included: a 401, 404 or 421 is a page a frame or a sniffing browser could be pointed at too."""
    token = {"Authorization": f"Bearer {admin_ui.token}"}
    tries = [
        ("GET", "/", {}, 200),
        ("GET", "/static/app.js", {}, 200),
        ("GET", "/api/whoami", token, 200),
        ("GET", "/api/whoami", {}, 401),
        ("GET", "/static/none.js", {}, 404),
        ("GET", "/nowhere", {}, 404),
        ("PUT", "/api/whoami", {**token, "X-TJ-UI": "1"}, 405),
        ("POST", f"/api/namespaces/{namespace}/trainingjobs/x/suspend", token, 403),
        ("GET", "/", {"Host": "attacker.example"}, 421),
        ("GET", "/static/..%2fserver.py", {}, 404),  # no way out of the static directory
        ("GET", "/static/%2e%2e/server.py", {}, 404),
        ("OPTIONS", "/api/whoami", PREFLIGHT, 401),  # a preflight: granted nothing, so nothing follows it
    ]
    for method, path, headers, expected in tries:
        connection = http.client.HTTPConnection("127.0.0.1", admin_ui.port, timeout=10)
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        response.read()
        connection.close()
        assert response.status == expected, (method, path, response.status)
        for header, value in SECURITY_HEADERS.items():
            assert response.getheader(header) == value, (method, path, header, response.getheader(header))
        policy = response.getheader("Content-Security-Policy") or ""
        assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy, (method, path, policy)
        assert response.getheader("Access-Control-Allow-Origin") is None, (method, path)


def test_a_page_on_another_port_that_frames_the_ui_shows_nothing_of_it(
    browser: Any, admin_ui: RunningUi, other_origin: str
) -> None:
    """Clickjacking: the page would lay the UI's Delete button under its own bait. The frame stays empty."""
    OtherOrigin.pages = {"/frame": f'<!doctype html><iframe id="ui" src="{admin_ui.login_url}"></iframe>'}
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        with page.expect_response(lambda r: r.url.startswith(admin_ui.base)) as answered:
            page.goto(f"{other_origin}/frame")
        assert answered.value.status == 200  # the browser asked and got the page, and refused to show it
        page.wait_for_load_state("load")
        framed = [frame for frame in page.frames if frame is not page.main_frame]
        assert len(framed) == 1
        assert not framed[0].url.startswith(admin_ui.base), framed[0].url
        shown = framed[0].evaluate("() => document.querySelectorAll('[data-testid=identity], main').length")
        assert shown == 0
        assert all(admin_ui.token not in (s or "") for s in [page.evaluate("() => document.body.innerText")])
    finally:
        context.close()

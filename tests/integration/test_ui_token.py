"""The UI's credential stays with the UI's own origin (issue 41, finding 4), in a real browser.

Found by trying: the token cookie the UI set for 127.0.0.1 was sent to every other service on 127.0.0.1 (cookies
are not separated by port), and a page on another local port used it to suspend a job as the UI's user. Now the
token lives in the UI tab's sessionStorage (scheme + host + port) and goes out only in an Authorization header."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.integration.ui_support import UI_TIMEOUT_MS, OtherOrigin, RunningUi
from tests.jobs import create_job, get_job, job_manifest, wait_phase
from tests.kube import Kube

pytestmark = pytest.mark.integration


def test_another_local_port_gets_neither_the_token_nor_a_way_to_act(
    browser: Any, admin_ui: RunningUi, other_origin: str, kube: Kube, namespace: str
) -> None:
    create_job(kube, namespace, job_manifest("guarded", complete_after=None))
    wait_phase(kube, namespace, "guarded", "Running")
    context = browser.new_context()
    try:
        ui = context.new_page()
        ui.set_default_timeout(UI_TIMEOUT_MS)
        ui.goto(admin_ui.login_url)
        expect(ui.get_by_test_id("identity")).to_contain_text("acting as")
        assert "token" not in ui.url, "the token left the address bar"
        expect(ui.locator(f'tr[data-job="{namespace}/guarded"]')).to_have_count(1)

        other = context.new_page()
        other.goto(f"{other_origin}/")
        assert OtherOrigin.cookies and not any(admin_ui.token in cookie for cookie in OtherOrigin.cookies)
        assert all(admin_ui.token not in cookie["value"] for cookie in context.cookies())
        assert other.evaluate("() => sessionStorage.length + localStorage.length") == 0
        # The other origin's page may send requests to the UI, but it has no token to send with them.
        suspend = f"{admin_ui.base}/api/namespaces/{namespace}/trainingjobs/guarded/suspend"
        status = other.evaluate(
            """async (url) => {
                const response = await fetch(url, {
                    method: "POST", mode: "no-cors", credentials: "include",
                    headers: {"Content-Type": "text/plain"}, body: '{"suspend": true}'});
                return response.type;
            }""",
            suspend,
        )
        assert status == "opaque"
    finally:
        context.close()
    assert not get_job(kube, namespace, "guarded")["spec"].get("suspend"), "nobody suspended the job"


def test_a_cookie_left_by_an_earlier_version_is_deleted(browser: Any, admin_ui: RunningUi) -> None:
    context = browser.new_context()
    try:
        context.add_cookies([{"name": "tj_ui_token", "value": admin_ui.token, "url": admin_ui.base}])
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        page.goto(admin_ui.login_url)
        expect(page.get_by_test_id("identity")).to_contain_text("acting as")
        assert [c for c in context.cookies() if c["name"] == "tj_ui_token"] == []
    finally:
        context.close()


def test_a_job_page_opened_without_the_token_says_how_to_get_in_and_takes_it(
    browser: Any, admin_ui: RunningUi, kube: Kube, namespace: str
) -> None:
    """sessionStorage is per tab: a job's page opened in a new tab (or from a bookmark) has no token. It says why and
    how to get in, takes the printed URL pasted, and then shows the page asked for; still no cookie anywhere."""
    create_job(kube, namespace, job_manifest("elsewhere", complete_after=None))
    wait_phase(kube, namespace, "elsewhere", "Running")
    with fresh_page(browser) as (context, page):
        page.goto(f"{admin_ui.base}/#/jobs/{namespace}/elsewhere")
        sign_in = page.get_by_test_id("sign-in")
        expect(sign_in).to_contain_text("This tab is not signed in")
        expect(sign_in).to_contain_text("open the URL `tj ui` printed")
        expect(page.get_by_test_id("sign-in")).to_have_count(1)
        page.get_by_test_id("token-input").fill(admin_ui.login_url)
        with page.expect_navigation():  # the page is loaded again, with the token
            page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_test_id("identity")).to_contain_text("acting as", timeout=UI_TIMEOUT_MS)
        expect(page.get_by_test_id("phase").first).to_contain_text("Running", timeout=UI_TIMEOUT_MS)
        assert page.url.endswith(f"#/jobs/{namespace}/elsewhere"), page.url
        expect(page.get_by_test_id("sign-in")).to_have_count(0)
        assert context.cookies() == []


@contextlib.contextmanager
def fresh_page(browser: Any) -> Iterator[tuple[Any, Any]]:
    """A page in a browser context of its own (no storage, no cookies), closed afterwards."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        yield context, page
    finally:
        context.close()

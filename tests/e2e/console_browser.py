"""Driving the approval console in a real headless Chromium (Debian's `chromium`, through
Playwright with its `executable_path`; no browser is downloaded): an approver per browser
context, each with its own IndexedDB, so its key is its own."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from ..conftest import Pipeline

ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
URL_IN_OUTPUT = re.compile(r"(https?://\S+/enrol#\S+)")


@contextmanager
def chromium() -> Iterator[Browser]:
    path = shutil.which("chromium")
    assert path is not None, "Debian's chromium is needed: apt-get install chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def enrol_url(cli_output: str) -> str:
    found = URL_IN_OUTPUT.search(cli_output)
    assert found is not None, cli_output
    return found[1]


def enrol(browser: Browser, url: str) -> tuple[BrowserContext, Page]:
    """A new browser (context) that enrols from `url` and is logged in, on its inbox."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(url)
    button = page.locator("#enrol")
    expect(button).to_be_enabled(timeout=15_000)
    button.click()
    page.wait_for_url(re.compile(r"/$"), timeout=15_000)
    expect(page.locator("h1")).to_have_text("Waiting for your decision")
    return context, page


def log_in(page: Page, base: str, approver: str) -> None:
    page.goto(f"{base}/login")
    page.get_by_role("button", name=f"Log in as {approver}").click()
    page.wait_for_url(re.compile(r"/$"), timeout=15_000)


def open_card(page: Page, base: str, approval_id: str) -> None:
    page.goto(f"{base}/approvals/{approval_id}")
    expect(page.locator("#card-status")).to_be_visible()


def approve(page: Page, approver: str) -> None:
    """Approve the open card; its votes show the approval once approval-wait counted it."""
    page.locator("#approve").click()
    expect(page.locator("#votes")).to_contain_text(f"{approver}: APPROVE", timeout=20_000)


def deny(page: Page, approver: str, reason: str) -> None:
    page.locator("#deny-reason").fill(reason)
    page.locator("#deny").click()
    expect(page.locator("#votes")).to_contain_text(f"{approver}: DENY", timeout=20_000)


@dataclass
class Approver:
    """An approver enrolled in the console, in a browser context of its own, logged in."""

    name: str
    context: BrowserContext
    page: Page


def console_base(pipeline: Pipeline) -> str:
    runtime = pipeline.refresh_runtime()
    return f"http://{runtime['console_host']}:{runtime['console_port']}"


def invite(pipeline: Pipeline, name: str, *more: str) -> str:
    """`approvers invite` for acme's finance controllers and billing leads; the enrol URL."""
    done = pipeline.cli(
        "approvers",
        "invite",
        name,
        "--tenant",
        "acme",
        "--groups",
        "finance-controllers,billing-leads",
        "--risk-classes",
        "HIGH_RISK_EXTERNAL,CRITICAL_MUTATION",
        *more,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return enrol_url(done.stdout)


def enrolled(pipeline: Pipeline, browser: Browser, prefix: str) -> Approver:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    context, page = enrol(browser, invite(pipeline, name))
    return Approver(name, context, page)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as opened:
        yield opened


@pytest.fixture(scope="module")
def pair(pipeline: Pipeline, browser: Browser) -> Iterator[tuple[Approver, Approver]]:
    """Two approvers of acme's finance controllers, each enrolled in a browser of its own (a pair
    per module that imports this fixture)."""
    first, second = enrolled(pipeline, browser, "pat"), enrolled(pipeline, browser, "quinn")
    yield first, second
    first.context.close()
    second.context.close()


EXPORT = """async (name) => {
  const db = await new Promise((ok) => {
    const r = indexedDB.open("toolgate-console", 1);
    r.onsuccess = () => ok(r.result);
  });
  const entry = await new Promise((ok) => {
    const r = db.transaction("keys").objectStore("keys").get(name);
    r.onsuccess = () => ok(r.result);
  });
  try { await crypto.subtle.exportKey("pkcs8", entry.privateKey); return "exported"; }
  catch (e) { return `${entry.privateKey.extractable}:${e.name}`; }
}"""
POST = """async ([path, body, csrf]) => {
  const headers = {"Content-Type": "application/json"};
  const own = document.querySelector("meta[name=csrf-token]");
  if (csrf === true) headers["X-CSRF-Token"] = own ? own.content : "";
  else if (csrf) headers["X-CSRF-Token"] = csrf;
  const r = await fetch(path, {method: "POST", headers, body: JSON.stringify(body)});
  return [r.status, await r.text()];
}"""


def exported(page: Page, approver: str) -> str:
    """What exporting the approver's private key from the page's IndexedDB gives."""
    return str(page.evaluate(EXPORT, approver))


def post(page: Page, path: str, body: object, csrf: bool | str = True) -> tuple[int, str]:
    """A POST from the page itself (its origin, its cookie): with the session's CSRF token
    (True), another one (a string), or none (False); the status and the text answered."""
    status, text = page.evaluate(POST, [path, body, csrf])
    return int(status), str(text)

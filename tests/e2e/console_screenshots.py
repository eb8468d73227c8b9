"""Screenshots of the approval console for the docs: `docs/img/console-inbox.png` and
`docs/img/console-card.png`, taken in headless Chromium from a running `toolgate up` (its home
in TOOLGATE_HOME). Run: `python tests/e2e/console_screenshots.py`. It invites and enrols two
approvers, holds a charge and an email for approval, approves the charge once, and shoots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.e2e.console_browser import approve, chromium, enrol, enrol_url, open_card  # noqa: E402

HOME = Path(os.environ.get("TOOLGATE_HOME", Path.home() / ".toolgate"))


def toolgate(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "toolgate.cli", *args], capture_output=True, text=True, check=True)
    return done.stdout


def invited(name: str) -> str:
    out = toolgate(
        "approvers", "invite", name, "--tenant", "acme", "--groups", "finance-controllers,billing-leads",
        "--risk-classes", "HIGH_RISK_EXTERNAL,CRITICAL_MUTATION",
    )  # fmt: skip
    return enrol_url(out)


def held(database_url: str, suffix: str) -> str:
    invoice = f"inv_{suffix}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents) "
            "VALUES (%s, 'acme', 'cust_acme02', 'open', 'USD', 125000)",
            (invoice,),
        )
    charge = {"invoice_id": invoice, "amount_cents": 125000, "currency": "USD"}
    toolgate("propose", "payment.charge_card", "--args", json.dumps(charge), "--idempotency-key", f"shot-{suffix}")
    email = {"to": "ap@coyote.example", "subject": "Invoice <b>overdue</b>", "body": "Please pay <script>x()</script>"}
    toolgate("propose", "notify.send_email", "--args", json.dumps(email))
    with psycopg.connect(database_url, autocommit=True) as conn:
        for _ in range(60):
            row = conn.execute(
                "SELECT approval_id FROM toolgate.approvals WHERE packet->'arguments'->>'invoice_id' = %s", (invoice,)
            ).fetchone()
            if row:
                return str(row[0])
            time.sleep(0.5)
    raise SystemExit("the charge was never held for approval")


def main() -> None:
    runtime = json.loads((HOME / "runtime.json").read_text())
    base = f"http://{runtime['console_host']}:{runtime['console_port']}"
    suffix = uuid.uuid4().hex[:6]
    out = REPO / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        _, first = enrol(browser, invited(f"pat-{suffix}"))
        _, second = enrol(browser, invited(f"quinn-{suffix}"))
        approval_id = held(runtime["database_url"], suffix)
        open_card(first, base, approval_id)
        approve(first, f"pat-{suffix}")
        second.set_viewport_size({"width": 1200, "height": 520})
        second.goto(base + "/")
        second.locator(f"tr[data-approval-id='{approval_id}']").wait_for()
        time.sleep(1.5)
        second.screenshot(path=str(out / "console-inbox.png"))
        second.set_viewport_size({"width": 1000, "height": 900})
        open_card(second, base, approval_id)
        second.screenshot(path=str(out / "console-card.png"), full_page=True)
    print(f"wrote {out / 'console-inbox.png'} and {out / 'console-card.png'}")


if __name__ == "__main__":
    main()

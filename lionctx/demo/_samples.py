"""The demo's embedded sample data (a support desk of a fictional cloud company),
written to a temporary folder or served from 127.0.0.1 at run time."""

from __future__ import annotations

__all__ = ["ARCHIVE", "INCIDENTS", "NOTES", "PROFILE_SQL", "QUESTION", "STATUS",
           "SYSTEM_PROMPT", "USER_ID", "USERS"]

QUESTION = "Is the billing API healthy right now, and does my plan include phone support?"

SYSTEM_PROMPT = (
    "You are the support assistant of Northwind Cloud. Answer from the context below; "
    "when it does not say, say so."
)

USER_ID = "u-1042"

#: Notes the filesystem provider reads (relative path -> text).
NOTES: dict[str, str] = {
    "billing-runbook.md": (
        "Billing API runbook\n"
        "\n"
        "- Status 'degraded' means invoices still go out, with delays of up to 30 minutes.\n"
        "- Customers need not retry payments during a degradation: queued charges are\n"
        "  replayed automatically once the API recovers.\n"
        "- Escalate to on-call billing if 'degraded' lasts more than two hours.\n"
    ),
    "support-plans.md": (
        "Support plans\n"
        "\n"
        "| plan       | channels             | first response |\n"
        "|------------|----------------------|----------------|\n"
        "| Starter    | email                | 2 business days|\n"
        "| Team       | email, chat          | 8 hours        |\n"
        "| Enterprise | email, chat, phone   | 1 hour         |\n"
        "\n"
        "Phone support is only on Enterprise. Team customers can add it for $200/month.\n"
    ),
}

#: Old notes in their own folder, read by a low-priority provider that the demo's
#: budget leaves out.
ARCHIVE: dict[str, str] = {
    "2023-billing-postmortem.md": (
        "Postmortem: billing outage of 14 March 2023\n"
        "\n"
        + "".join(
            f"- {t}: {e}\n" for t, e in [
                ("09:02", "invoice export jobs begin to time out"),
                ("09:15", "alert fires for the payment queue depth"),
                ("09:31", "on-call billing paged; database failover started"),
                ("09:48", "failover completes; queue drains slowly"),
                ("10:20", "exports back to normal; 1,204 invoices delayed"),
                ("10:45", "customer notice posted on the status page"),
                ("11:30", "root cause: a schema migration locked the invoices table"),
                ("12:00", "action items: online migrations only; queue depth SLO"),
            ]
        )
        + "\nLessons: migrations must be online; the status page must update within "
          "ten minutes of an alert; support needs a canned answer for delayed invoices.\n"
    ),
}

#: Rows of the demo's ``users`` table.
USERS: list[tuple[str, str, str, str, int]] = [
    (USER_ID, "Ada Okafor", "Team", "eu-west-1", 12),
    ("u-2077", "Lin Park", "Enterprise", "us-east-2", 140),
]

#: The query the SQLite provider runs; ``:user_id`` is bound from the run context.
PROFILE_SQL = "SELECT name, plan, region, seats FROM users WHERE id = :user_id"

#: What ``/status`` answers.
STATUS: dict[str, str] = {
    "service": "billing-api",
    "status": "degraded",
    "detail": "invoice exports delayed by up to 30 minutes",
    "updated": "5 minutes ago",
}

#: What ``/incidents`` would answer, if it ever answered in time.
INCIDENTS: dict[str, str] = {"open": "INC-311 invoice export latency"}

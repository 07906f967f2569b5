"""The demo's sample data (a support desk of a fictional cloud company), copied to a
temporary folder or served from 127.0.0.1 at run time."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FOLDER", "INCIDENTS", "PROFILE_SQL", "QUESTION", "STATUS", "SYSTEM_PROMPT",
           "USER_ID", "USERS"]

QUESTION = "Is the billing API healthy right now, and does my plan include phone support?"

SYSTEM_PROMPT = (
    "You are the support assistant of Northwind Cloud. Answer from the context below; "
    "when it does not say, say so."
)

USER_ID = "u-1042"

#: The sample documents: ``notes/``, and ``archive/`` (old notes the budget leaves out).
FOLDER = Path(__file__).with_name("samples")

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

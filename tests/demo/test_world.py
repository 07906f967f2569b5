"""The demo's temporary sources: built, served on 127.0.0.1, and removed."""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import closing

import httpx
from lionctx.demo import _samples as samples
from lionctx.demo._world import StatusServer, demo_world

from ..cli.helpers import port_is_closed


def test_demo_world_builds_the_sources_and_removes_them():
    with demo_world() as world:
        root, port = world.root, world.status.port
        for folder in (world.notes, world.archive):
            sample = samples.FOLDER / folder.name
            assert sorted(p.name for p in folder.iterdir()) == sorted(
                p.name for p in sample.iterdir())
            assert all((folder / p.name).read_bytes() == p.read_bytes() for p in sample.iterdir())
        assert (world.notes / "support-plans.md").read_text().startswith("Support plans\n")
        with closing(sqlite3.connect(world.database)) as conn:
            row = conn.execute(samples.PROFILE_SQL, {"user_id": samples.USER_ID}).fetchone()
        assert row == ("Ada Okafor", "Team", "eu-west-1", 12)
        resp = httpx.get(f"{world.status.url}/status")
        assert resp.status_code == 200 and resp.json() == samples.STATUS
        assert world.status.url == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{world.status.url}/nope").status_code == 404
    assert not root.exists()
    assert port_is_closed(port)


def test_stopping_the_status_server_releases_a_waiting_slow_request():
    server = StatusServer(slow_seconds=3600).start()
    answers: list[int] = []

    def ask() -> None:
        try:
            answers.append(httpx.get(f"{server.url}/incidents", timeout=60).status_code)
        except httpx.HTTPError:
            answers.append(-1)

    asker = threading.Thread(target=ask)
    asker.start()
    assert server.slow_started.wait(60)
    server.stop()
    asker.join(timeout=60)
    assert not asker.is_alive()  # it did not wait an hour
    assert answers == [503]
    assert port_is_closed(server.port)


def test_status_payload_is_json_of_the_sample():
    with StatusServer() as server:
        body = httpx.get(f"{server.url}/status").text
    assert json.loads(body) == samples.STATUS

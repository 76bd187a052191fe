"""The stored history the chat page reads: the newest turns, those after one,
or a page before one."""

from __future__ import annotations

import httpx

from noema.interfaces.web.chat_routes import HISTORY_LIMIT
from noema.providers.scripted import say
from .conftest import sign_in


def test_history_reads_the_newest_turns_or_those_after_one(live):
    live.script(say("One."), say("Two."))
    cookies, headers = sign_in(live.server.credentials)
    with httpx.Client(base_url=live.base, cookies=cookies, timeout=20) as client:
        for text in ("first", "second"):
            assert client.post("/api/say", json={"text": text}, headers=headers).status_code == 200
            live.idle()
        whole = client.get("/api/history").json()["turns"]
        ids = [t["id"] for t in whole]
        assert ids == sorted(ids) and len(ids) <= HISTORY_LIMIT
        assert ids[-1] == live.app.store.last_id()
        middle = ids[-3]
        after = client.get(f"/api/history?after={middle}").json()["turns"]
        assert [t["id"] for t in after] == ids[-2:]
        assert client.get(f"/api/history?after={ids[-1]}").json()["turns"] == []
        assert client.get("/api/history?after=soon").status_code == 400
        older = client.get(f"/api/history?before={ids[-1]}&limit=2").json()
        assert [t["id"] for t in older["turns"]] == ids[-3:-1] and older["more"]
        first = client.get(f"/api/history?before={ids[-1]}&limit=2&oldest=1").json()
        assert [t["id"] for t in first["turns"]] == [1, 2]
        start = client.get("/api/history?before=2").json()
        assert [t["id"] for t in start["turns"]] == [1] and not start["more"]
        assert client.get("/api/history?oldest=yes").status_code == 400
        answer = next(t for t in whole if t["content"] == "Two.")
        assert answer["html"] == "<p>Two.</p>\n"  # assistant text also comes as sanitised HTML

"""Every route of the web page, in one table."""

from __future__ import annotations

from pathlib import Path

from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from . import chat_routes as chat
from . import demo_routes as demo
from . import files_routes as files
from . import first_run_routes as first_run
from . import guide_routes as guide
from . import memory_routes as memory
from . import senses_routes as senses
from . import session_routes as sessions
from . import settings_routes as settings

HERE = Path(__file__).parent


def routes() -> list[BaseRoute]:
    """Every route of the web page."""
    return [
        Route("/", chat.chat_page),
        Route("/memory", memory.memory_page),
        Route("/memory/turn/{turn_id:int}", memory.turn_page),
        Route("/files", files.files_page),
        Route("/files/diff", files.diff_page),
        Route("/api/files/restore", files.restore_file, methods=["POST"]),
        Route("/api/files/undo", files.undo_write, methods=["POST"]),
        Route("/senses", senses.senses_page),
        Route("/senses/batch/{batch_id}", senses.batch_page),
        Route("/api/senses/silence", senses.silence, methods=["POST"]),
        Route("/api/senses/start", senses.start_sense, methods=["POST"]),
        Route("/api/senses/rule", senses.rule_test, methods=["POST"]),
        Route("/settings", settings.settings_page),
        Route("/guide", guide.guide),
        Route("/guide/", guide.guide),
        Route("/guide/{name}", guide.guide),
        Route("/api/settings", settings.save_section, methods=["POST"]),
        Route("/api/settings/models", settings.served_models, methods=["POST"]),
        Route("/api/settings/window", settings.served_window, methods=["POST"]),
        Route("/api/settings/test", settings.test_model, methods=["POST"]),
        Route("/api/first-run/models", first_run.models, methods=["POST"]),
        Route("/api/first-run/window", first_run.window, methods=["POST"]),
        Route("/api/first-run/test", first_run.test, methods=["POST"]),
        Route("/api/first-run/save", first_run.save, methods=["POST"]),
        Route("/api/sessions", sessions.list_sessions),
        Route("/api/sessions/{number:int}/end", sessions.end_session, methods=["POST"]),
        Route("/api/sign-out", sessions.sign_out, methods=["POST"]),
        Route("/api/history", chat.history),
        Route("/api/turn/{turn_id:int}", chat.turn),
        Route("/api/status", chat.status),
        Route("/api/say", chat.say, methods=["POST"]),
        Route("/api/stop", chat.stop, methods=["POST"]),
        Route("/api/answer", chat.answer, methods=["POST"]),
        Route("/live", chat.live),
        Route("/api/demo/start", demo.start_demo, methods=["POST"]),
        Route("/api/demo/stop", demo.stop_demo, methods=["POST"]),
        Route("/api/demo/live", demo.demo_live),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

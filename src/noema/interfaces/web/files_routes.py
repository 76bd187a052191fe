"""The files page: versions, a diff, restore and undo."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..commands.versions import VersionsCommandError
from . import files as file_versions
from .context import BadRequest, context_of, error, json_body, page
from .diff_view import read_diff


async def files_page(request: Request) -> Response:
    web = context_of(request)
    try:
        found = await asyncio.to_thread(file_versions.workspaces, web.files, web.paths)
        problem = None
    except VersionsCommandError as exc:
        found, problem = [], str(exc)
    return page(request, "files.html", page="files", workspaces=found, problem=problem)


async def diff_page(request: Request) -> Response:
    """What one version changed, file by file, with Restore beside each file and
    Undo beside the whole."""
    web = context_of(request)
    version = request.query_params.get("version", "").strip()
    found = None
    try:
        if not version:
            raise VersionsCommandError("say which version: /files/diff?version=ID")
        text, problem = await asyncio.to_thread(file_versions.diff, web.files, web.paths,
                                                version), None
        spaces = await asyncio.to_thread(file_versions.workspaces, web.files, web.paths)
        found = next(((ws.folder, v) for ws in spaces for v in ws.versions
                      if v.id.startswith(version)), None)
    except VersionsCommandError as exc:
        text, problem = "", str(exc)
    return page(request, "diff.html", page="files", version=version, changes=read_diff(text),
                folder=found[0] if found else None, about=found[1] if found else None,
                problem=problem)


async def restore_file(request: Request) -> Response:
    web = context_of(request)
    try:
        body = await json_body(request)
        folder, path, version = body.get("folder"), body.get("path"), body.get("version")
        if not all(isinstance(v, str) and v for v in (folder, path, version)):
            raise BadRequest("a restore needs the folder, the path and the version")
        text = await asyncio.to_thread(file_versions.restore, web.files, web.paths, folder,
                                       path, version)
    except BadRequest as exc:
        return error(400, str(exc))
    except VersionsCommandError as exc:
        return error(409, str(exc))
    return JSONResponse({"ok": True, "text": text})


async def undo_write(request: Request) -> Response:
    web = context_of(request)
    try:
        text = await asyncio.to_thread(file_versions.undo, web.files, web.paths)
    except VersionsCommandError as exc:
        return error(409, str(exc))
    return JSONResponse({"ok": True, "text": text})

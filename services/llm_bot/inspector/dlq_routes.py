"""Dead letters in the inspector: the head of each DLQ by error code (never a body), and
"replay by code" through ``llm-bot dlq replay --code``'s own function.

A DLQ holds every tenant's dead letters, so only a key for every tenant (``*``) sees these
pages; any other key gets 404, as for a tenant it does not cover.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response

from llm_bot.adapters.rabbit_dlq import DlqNotFound, ReplayFailed
from llm_bot.entrypoints.dlq_cli import QUEUES, list_dead_letters, render_replay, topology_of
from llm_bot.inspector import actions
from llm_bot.inspector.access_keys import ALL_TENANTS
from llm_bot.inspector.routing import Pages, csrf_checked_form
from llm_bot.inspector.sessions import Session

SHOWN = 100
"""Dead letters read from the head of each DLQ for the page (listing removes nothing)."""
_CODE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def _every_tenant(session: Session) -> None:
    if session.scope.tenant != ALL_TENANTS:
        raise HTTPException(status_code=404)


def _queue_and_code(queue: str, code: str) -> None:
    if queue not in QUEUES or not _CODE.fullmatch(code):
        raise HTTPException(status_code=404)


async def dlq_view(pages: Pages, queue: str) -> dict[str, Any]:
    """One DLQ: its name, depth, and the codes of the dead letters at its head."""
    broker = pages.inspector.settings.broker
    name = topology_of(broker, queue).dlq
    try:
        letters, depth = await list_dead_letters(broker, limit=SHOWN, queue=queue)
    except DlqNotFound:
        return {"queue": queue, "name": name, "exists": False, "depth": 0, "codes": []}
    codes = Counter(letter.code for letter in letters)
    return {
        "queue": queue,
        "name": name,
        "exists": True,
        "depth": depth,
        "shown": len(letters),
        "codes": [{"code": code, "count": n} for code, n in sorted(codes.items())],
    }


def register(app: FastAPI, pages: Pages) -> None:
    @app.get("/dlq")
    async def dead_letters(request: Request) -> Response:
        session = pages.session_of(request)
        _every_tenant(session)
        data = {"queues": [await dlq_view(pages, queue) for queue in QUEUES], "shown": SHOWN}
        return pages.page(request, "dlq.html", data, session)

    @app.api_route("/dlq/{queue}/replay", methods=["GET", "POST"])
    async def replay(request: Request, queue: str) -> Response:
        session = pages.session_of(request)
        _every_tenant(session)
        code = request.query_params.get("code", "")
        _queue_and_code(queue, code)
        view = await dlq_view(pages, queue)
        counted = next((c["count"] for c in view["codes"] if c["code"] == code), 0)
        what: dict[str, Any] = {
            "action": "replay_dead_letters",
            "title": f"Replay the dead letters with code {code}?",
            "button": "Replay",
            "queue": queue,
            "code": code,
            "changes": [
                f"every dead letter with code {code} in {view['name']} goes back to its "
                f"queue ({counted} among the {view.get('shown', 0)} at the head of "
                f"{view['depth']})",
            ],
            "back": "/dlq",
        }
        if request.method == "GET":
            return pages.page(request, "confirm.html", what, pages.session_of(request))
        await csrf_checked_form(request, session)
        try:
            result = await actions.replay_dead_letters_by_code(
                pages.inspector, session.scope, queue, code
            )
        except (DlqNotFound, ReplayFailed) as exc:
            failed = {**what, "done": [f"Replay failed: {exc}"]}
            return pages.page(request, "done.html", failed, session, status_code=502)
        done = {**what, "done": [render_replay(result, limit=None, code=code)]}
        done["replayed"], done["left"] = result.replayed, result.left
        return pages.page(request, "done.html", done, session)

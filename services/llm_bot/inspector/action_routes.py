"""The inspector's actions on a user's memory: forget a conversation or the user, remove a
fact, correct a fact's value, download the user's export. Each is a GET that shows a confirmation naming what will go
or change, then a POST carrying the session's CSRF token that does it (``actions.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response

from llm_bot.errors import ErasedMeanwhile
from llm_bot.inspector import actions, views
from llm_bot.inspector.routing import Pages, allowed, csrf_checked_form
from llm_bot.inspector.sessions import Session
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.fact_edits import (
    MAX_FACT_CHARS,
    FactEditRefused,
    correction,
    current_fact,
)
from llm_bot.memory.long_term import SemanticFact


async def _confirmed(
    pages: Pages,
    request: Request,
    session: Session,
    what: dict[str, Any],
    act: Callable[[], Awaitable[list[str]]],
) -> Response:
    """GET: the confirmation naming what will go; POST (with the CSRF token): done, with
    the lines ``act`` returns."""
    if request.method == "GET":
        return pages.page(request, "confirm.html", what, session)
    await csrf_checked_form(request, session)
    done = await act()
    return pages.page(request, "done.html", {**what, "done": done}, session)


def _user_facts_url(tenant_id: str, user_id: str) -> str:
    return f"/t/{tenant_id}/u/{user_id}#facts"


async def _current(pages: Pages, tenant_id: str, user_id: str, fact_id: str) -> SemanticFact:
    """The current fact ``fact_id``: 404 when the user has none by that id."""
    try:
        return current_fact(await pages.inspector.ltm.facts(tenant_id, user_id), fact_id)
    except FactEditRefused as exc:
        raise HTTPException(status_code=404) from exc


def register(app: FastAPI, pages: Pages) -> None:
    _register_export(app, pages)
    _register_forgetting(app, pages)
    _register_fact_removal(app, pages)
    _register_fact_correction(app, pages)


def _register_forgetting(app: FastAPI, pages: Pages) -> None:
    inspector, session_of = pages.inspector, pages.session_of

    @app.api_route("/t/{tenant_id}/u/{user_id}/c/{conversation_id}/forget", methods=["GET", "POST"])
    async def forget_conversation(
        request: Request, tenant_id: str, user_id: str, conversation_id: str
    ) -> Response:
        session = session_of(request)
        allowed(session, tenant_id, user_id, conversation_id)
        key = ConversationKey(tenant_id, user_id, conversation_id)
        shown = await views.conversation_view(inspector, key)
        memory = shown["working_memory"] or {"messages": []}
        what = {
            "action": "forget_conversation",
            "title": f"Forget conversation {conversation_id}?",
            "button": "Forget",
            "tenant_id": tenant_id,
            "user_id": user_id,
            "conversation_id": conversation_id,
            "goes": [
                f"the conversation's window ({len(memory['messages'])} messages), summary and "
                f"raw trace ({len(shown['raw_trace'])} messages)",
                "what it contributed to the user's long-term memory",
                "its entries in the retrieval index",
            ],
            "back": f"/t/{tenant_id}/u/{user_id}",
        }

        async def act() -> list[str]:
            deleted = await actions.forget_conversation(
                inspector, session.scope, tenant_id, user_id, conversation_id
            )
            return [f"{deleted} keys and items erased."]

        return await _confirmed(pages, request, session, what, act)

    @app.api_route("/t/{tenant_id}/u/{user_id}/forget", methods=["GET", "POST"])
    async def forget_user(request: Request, tenant_id: str, user_id: str) -> Response:
        session = session_of(request)
        allowed(session, tenant_id, user_id)
        user = await views.user_view(inspector, tenant_id, user_id)
        what = {
            "action": "forget_user",
            "title": f"Forget user {user_id}?",
            "button": "Forget",
            "tenant_id": tenant_id,
            "user_id": user_id,
            "conversation_id": "*",
            "goes": [
                f"every conversation of the user ({len(user['conversations'])})",
                f"the profile ({len(user['profile'])} attributes), facts ({len(user['facts'])}), "
                f"episodes ({len(user['episodes'])}) and notable events ({len(user['events'])})",
                f"the retrieval index ({user['index_entries']} entries)",
            ],
            "back": f"/t/{tenant_id}",
        }

        async def act() -> list[str]:
            deleted = await actions.forget_user(inspector, session.scope, tenant_id, user_id)
            return [f"{deleted} keys and items erased."]

        return await _confirmed(pages, request, session, what, act)


def _register_fact_removal(app: FastAPI, pages: Pages) -> None:
    inspector, session_of = pages.inspector, pages.session_of

    @app.api_route("/t/{tenant_id}/u/{user_id}/f/{fact_id}/remove", methods=["GET", "POST"])
    async def remove_fact(request: Request, tenant_id: str, user_id: str, fact_id: str) -> Response:
        session = session_of(request)
        allowed(session, tenant_id, user_id, fact_id)
        facts = await inspector.ltm.facts(tenant_id, user_id)
        fact = await _current(pages, tenant_id, user_id, fact_id)
        revived = [f.fact for f in facts if f.superseded_by == fact.id]
        what = {
            "action": "remove_fact",
            "title": "Remove this fact?",
            "button": "Remove",
            "tenant_id": tenant_id,
            "user_id": user_id,
            "fact_id": fact_id,
            "goes": [f"the fact: {fact.fact}", "its entry in the retrieval index"],
            "changes": [f"current again (it had replaced them): {value}" for value in revived],
            "back": _user_facts_url(tenant_id, user_id),
        }

        async def act() -> list[str]:
            try:
                await actions.remove_fact(inspector, session.scope, tenant_id, user_id, fact_id)
            except FactEditRefused as exc:  # removed or superseded since the confirmation
                raise HTTPException(status_code=404) from exc
            return ["The fact was removed."]

        return await _confirmed(pages, request, session, what, act)


def _register_fact_correction(app: FastAPI, pages: Pages) -> None:
    inspector, session_of = pages.inspector, pages.session_of

    @app.api_route("/t/{tenant_id}/u/{user_id}/f/{fact_id}/correct", methods=["GET", "POST"])
    async def correct_fact(
        request: Request, tenant_id: str, user_id: str, fact_id: str
    ) -> Response:
        """GET: the form; POST without ``confirmed``: the confirmation naming the change;
        POST with it: done."""
        session = session_of(request)
        allowed(session, tenant_id, user_id, fact_id)
        fact = await _current(pages, tenant_id, user_id, fact_id)
        data: dict[str, Any] = {
            "action": "correct_fact",
            "tenant_id": tenant_id,
            "user_id": user_id,
            "fact_id": fact_id,
            "value": fact.fact,
            "new_value": fact.fact,
            "max_chars": MAX_FACT_CHARS,
            "error": "",
            "back": _user_facts_url(tenant_id, user_id),
        }
        if request.method == "GET":
            return pages.page(request, "correct.html", data, session)
        form = await csrf_checked_form(request, session)
        data["new_value"] = new_value = form.get("value", "")
        try:  # refused before the confirmation when it would be refused after it
            correction(await inspector.ltm.facts(tenant_id, user_id), fact_id, new_value, now="")
        except FactEditRefused as exc:
            data["error"] = str(exc)
            return pages.page(request, "correct.html", data, session, status_code=409)
        if form.get("confirmed") != "yes":
            what = {
                **data,
                "title": "Correct this fact?",
                "button": "Correct",
                "changes": [
                    f"current value (kept, superseded, provenance operator): {fact.fact}",
                    f"new value: {' '.join(new_value.split())}",
                ],
                "fields": {"value": new_value, "confirmed": "yes"},
            }
            return pages.page(request, "confirm.html", what, session)
        try:
            change = await actions.correct_fact(
                inspector, session.scope, tenant_id, user_id, fact_id, value=new_value
            )
        except FactEditRefused as exc:
            data["error"] = str(exc)
            return pages.page(request, "correct.html", data, session, status_code=409)
        done = [f"The fact now reads: {change.current.fact}"]
        return pages.page(request, "done.html", {**data, "done": done}, session)


def _register_export(app: FastAPI, pages: Pages) -> None:
    inspector, session_of = pages.inspector, pages.session_of

    @app.get("/t/{tenant_id}/u/{user_id}/export")
    async def export_user(request: Request, tenant_id: str, user_id: str) -> Response:
        """The user's memory as ``llm-bot memory export`` writes it, as a download."""
        session = session_of(request)
        allowed(session, tenant_id, user_id)
        try:
            line = await actions.export_user(inspector, session.scope, tenant_id, user_id)
        except ErasedMeanwhile as exc:
            raise HTTPException(status_code=409, detail="the user is being erased") from exc
        return Response(
            line,
            media_type="application/x-ndjson",
            headers={
                "Content-Disposition": (
                    f'attachment; filename="memory-{tenant_id}-{user_id}.jsonl"'
                ),
                "Cache-Control": "no-store",
            },
        )

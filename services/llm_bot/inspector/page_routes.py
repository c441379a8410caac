"""The inspector's pages: home, a tenant's users, a user's conversations, a conversation,
and the dry run of what a message would recall ("why")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import RedirectResponse

from llm_bot.inspector import views
from llm_bot.inspector.access_keys import ALL_TENANTS
from llm_bot.inspector.routing import Pages, allowed
from llm_bot.memory.conversation_key import ConversationKey

MAX_MESSAGE_CHARS = 20_000


def register(app: FastAPI, pages: Pages) -> None:
    inspector = pages.inspector
    session_of, page = pages.session_of, pages.page

    @app.get("/")
    async def home(request: Request) -> Response:
        session = session_of(request)
        tenant = request.query_params.get("tenant")
        if tenant is not None:
            allowed(session, tenant)
            return RedirectResponse(f"/t/{tenant}", status_code=303)
        if session.scope.tenant != ALL_TENANTS:
            return RedirectResponse(f"/t/{session.scope.tenant}", status_code=303)
        return page(request, "home.html", {"scope": session.scope.tenant}, session)

    @app.get("/t/{tenant_id}")
    async def tenant_page(request: Request, tenant_id: str) -> Response:
        session = session_of(request)
        allowed(session, tenant_id)
        data = await views.tenant_view(inspector, tenant_id, _page_number(request))
        return page(request, "tenant.html", data, session)

    @app.get("/t/{tenant_id}/u/{user_id}")
    async def user_page(request: Request, tenant_id: str, user_id: str) -> Response:
        session = session_of(request)
        allowed(session, tenant_id, user_id)
        data = await views.user_view(inspector, tenant_id, user_id, _page_number(request))
        return page(request, "user.html", data, session)

    @app.get("/t/{tenant_id}/u/{user_id}/c/{conversation_id}")
    async def conversation_page(
        request: Request, tenant_id: str, user_id: str, conversation_id: str
    ) -> Response:
        session = session_of(request)
        allowed(session, tenant_id, user_id, conversation_id)
        key = ConversationKey(tenant_id, user_id, conversation_id)
        data = await views.conversation_view(inspector, key)
        return page(request, "conversation.html", data, session)

    @app.get("/t/{tenant_id}/u/{user_id}/c/{conversation_id}/why")
    async def why_page(
        request: Request, tenant_id: str, user_id: str, conversation_id: str
    ) -> Response:
        session = session_of(request)
        allowed(session, tenant_id, user_id, conversation_id)
        key = ConversationKey(tenant_id, user_id, conversation_id)
        message = request.query_params.get("message", "")[:MAX_MESSAGE_CHARS]
        when = request.query_params.get("at", "")
        data: dict[str, Any] = {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "conversation_id": conversation_id,
            "message": message,
            "at_input": when,
            "error": "",
            "result": None,
        }
        if message.strip():
            try:
                at = datetime.fromisoformat(when) if when else datetime.now(UTC)
            except ValueError:
                data["error"] = "The date is not an ISO 8601 date and time."
            else:
                at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
                data["result"] = await views.why_view(inspector, key, message, at)
        return page(request, "why.html", data, session)


def _page_number(request: Request) -> int:
    """The ``page`` query parameter: a positive number, else 1."""
    number = request.query_params.get("page", "1")
    return int(number) if number.isdigit() and int(number) > 0 else 1

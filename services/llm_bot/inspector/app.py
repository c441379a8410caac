"""The inspector's HTTP app: login, pages and their JSON twins (``?format=json``), actions.

Security (SPEC 7.3): a session cookie (``HttpOnly``, ``SameSite=Strict``) opened with an
inspector key; every POST carries the session's CSRF token; a URL naming a tenant the key
does not cover, or an id that does not match the id pattern, is 404 (the same answer as a
tenant that does not exist: no existence oracle); a CSP without any script; no message
text in logs.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.staticfiles import StaticFiles

from llm_bot.config import ID_PATTERN
from llm_bot.inspector import actions, views
from llm_bot.inspector.access_keys import ALL_TENANTS
from llm_bot.inspector.rendering import environment
from llm_bot.inspector.sessions import COOKIE, Session
from llm_bot.inspector.wiring import Inspector
from llm_bot.memory.working import ConversationKey

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
_ID = re.compile(ID_PATTERN)
MAX_MESSAGE_CHARS = 20_000


def _checked(*ids: str) -> None:
    for value in ids:
        if not _ID.fullmatch(value):
            raise HTTPException(status_code=404)


def _allowed(session: Session, tenant_id: str, *ids: str) -> None:
    """404 unless the ids are valid and the session's key covers the tenant."""
    _checked(tenant_id, *ids)
    if not session.scope.allows(tenant_id):
        raise HTTPException(status_code=404)


def _wants_json(request: Request) -> bool:
    return request.query_params.get("format") == "json"


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode(errors="replace")
    return {name: values[0] for name, values in parse_qs(body).items()}


def create_app(inspector: Inspector) -> FastAPI:  # noqa: PLR0915  # one statement per route, closures over one inspector
    app = FastAPI(title="llm-bot inspector", docs_url=None, redoc_url=None, openapi_url=None)
    templates = environment()
    app.mount(
        "/static", StaticFiles(directory=str(files("llm_bot.inspector") / "static")), "static"
    )

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Cache-Control"] = "no-store"
        return response

    def session_of(request: Request) -> Session:
        session = inspector.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            if _wants_json(request):
                raise HTTPException(status_code=401)
            raise HTTPException(status_code=303, headers={"Location": "/login"})
        return session

    def page(
        request: Request, template: str, data: dict[str, Any], session: Session | None
    ) -> Response:
        if _wants_json(request):
            return JSONResponse(data)
        html = templates.get_template(template).render(
            data=data, session=session, csrf=session.csrf if session else ""
        )
        return HTMLResponse(html)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 303 and exc.headers:
            return RedirectResponse(exc.headers["Location"], status_code=303)
        if _wants_json(request):
            return JSONResponse({"error": exc.status_code}, status_code=exc.status_code)
        html = templates.get_template("error.html").render(status=exc.status_code, session=None)
        return HTMLResponse(html, status_code=exc.status_code)

    @app.get("/login")
    async def login_form(request: Request) -> Response:
        return page(request, "login.html", {"error": ""}, None)

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await _form(request)
        scope = inspector.keys.scope_for(form.get("key", ""))
        if scope is None:
            html = templates.get_template("login.html").render(
                data={"error": "That key is not configured."}, session=None, csrf=""
            )
            return HTMLResponse(html, status_code=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            inspector.sessions.open(scope),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        session = session_of(request)
        form = await _form(request)
        if not session.csrf_matches(form.get("csrf")):
            raise HTTPException(status_code=403)
        inspector.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    @app.get("/")
    async def home(request: Request) -> Response:
        session = session_of(request)
        tenant = request.query_params.get("tenant")
        if tenant is not None:
            _allowed(session, tenant)
            return RedirectResponse(f"/t/{tenant}", status_code=303)
        if session.scope.tenant != ALL_TENANTS:
            return RedirectResponse(f"/t/{session.scope.tenant}", status_code=303)
        return page(request, "home.html", {"scope": session.scope.tenant}, session)

    @app.get("/t/{tenant_id}")
    async def tenant_page(request: Request, tenant_id: str) -> Response:
        session = session_of(request)
        _allowed(session, tenant_id)
        number = request.query_params.get("page", "1")
        page_number = int(number) if number.isdigit() and int(number) > 0 else 1
        data = await views.tenant_view(inspector, tenant_id, page_number)
        return page(request, "tenant.html", data, session)

    @app.get("/t/{tenant_id}/u/{user_id}")
    async def user_page(request: Request, tenant_id: str, user_id: str) -> Response:
        session = session_of(request)
        _allowed(session, tenant_id, user_id)
        data = await views.user_view(inspector, tenant_id, user_id)
        return page(request, "user.html", data, session)

    @app.get("/t/{tenant_id}/u/{user_id}/c/{conversation_id}")
    async def conversation_page(
        request: Request, tenant_id: str, user_id: str, conversation_id: str
    ) -> Response:
        session = session_of(request)
        _allowed(session, tenant_id, user_id, conversation_id)
        key = ConversationKey(tenant_id, user_id, conversation_id)
        data = await views.conversation_view(inspector, key)
        return page(request, "conversation.html", data, session)

    @app.get("/t/{tenant_id}/u/{user_id}/c/{conversation_id}/why")
    async def why_page(
        request: Request, tenant_id: str, user_id: str, conversation_id: str
    ) -> Response:
        session = session_of(request)
        _allowed(session, tenant_id, user_id, conversation_id)
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

    async def confirmed(
        request: Request, session: Session, what: dict[str, Any], act: Callable[[], Awaitable[int]]
    ) -> Response:
        """GET: the confirmation naming what will go; POST (with the CSRF token): done."""
        if request.method == "GET":
            return page(request, "confirm.html", what, session)
        form = await _form(request)
        if not session.csrf_matches(form.get("csrf")):
            raise HTTPException(status_code=403)
        deleted = await act()
        return page(request, "done.html", {**what, "deleted_keys": deleted}, session)

    @app.api_route("/t/{tenant_id}/u/{user_id}/c/{conversation_id}/forget", methods=["GET", "POST"])
    async def forget_conversation(
        request: Request, tenant_id: str, user_id: str, conversation_id: str
    ) -> Response:
        session = session_of(request)
        _allowed(session, tenant_id, user_id, conversation_id)
        key = ConversationKey(tenant_id, user_id, conversation_id)
        shown = await views.conversation_view(inspector, key)
        memory = shown["working_memory"] or {"messages": []}
        what = {
            "action": "forget_conversation",
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
        return await confirmed(
            request,
            session,
            what,
            lambda: actions.forget_conversation(
                inspector, session.scope, tenant_id, user_id, conversation_id
            ),
        )

    @app.api_route("/t/{tenant_id}/u/{user_id}/forget", methods=["GET", "POST"])
    async def forget_user(request: Request, tenant_id: str, user_id: str) -> Response:
        session = session_of(request)
        _allowed(session, tenant_id, user_id)
        user = await views.user_view(inspector, tenant_id, user_id)
        what = {
            "action": "forget_user",
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
        return await confirmed(
            request,
            session,
            what,
            lambda: actions.forget_user(inspector, session.scope, tenant_id, user_id),
        )

    return app

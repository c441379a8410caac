"""The inspector's HTTP app: login, pages and their JSON twins (``?format=json``), actions.

Security (SPEC 7.3): a session cookie (``HttpOnly``, ``SameSite=Strict``) opened with an
inspector key; every POST carries the session's CSRF token; a URL naming a tenant the key
does not cover, or an id that does not match the id pattern, is 404 (the same answer as a
tenant that does not exist: no existence oracle); a CSP without inline script (only the package's own files); no message
text in logs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.staticfiles import StaticFiles

from llm_bot.inspector import action_routes, dlq_routes, views
from llm_bot.inspector.access_keys import ALL_TENANTS, Scope
from llm_bot.inspector.rendering import environment
from llm_bot.inspector.routing import Pages, allowed, csrf_checked_form, form_of, wants_json
from llm_bot.inspector.sessions import COOKIE
from llm_bot.inspector.wiring import Inspector
from llm_bot.memory.conversation_key import ConversationKey

CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""Scripts only from the package's own files (``static/live.js``): no inline script, no
``javascript:`` URL, no event handler attribute runs."""
MAX_MESSAGE_CHARS = 20_000


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

    pages = Pages(inspector, templates)
    session_of, page = pages.session_of, pages.page

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 303 and exc.headers:
            return RedirectResponse(exc.headers["Location"], status_code=303)
        if wants_json(request):
            return JSONResponse({"error": exc.status_code}, status_code=exc.status_code)
        html = templates.get_template("error.html").render(status=exc.status_code, session=None)
        return HTMLResponse(html, status_code=exc.status_code)

    @app.get("/metrics")
    async def metrics() -> Response:
        """The inspector's counters (actions, failed logins) for Prometheus: counts only,
        no ids, no text, so no login (the port is the operators' own)."""
        return Response(generate_latest(inspector.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/login")
    async def login_form(request: Request) -> Response:
        return page(request, "login.html", {"error": ""}, None)

    def login_refused(error: str, status: int, retry_after: int | None = None) -> Response:
        html = templates.get_template("login.html").render(
            data={"error": error}, session=None, csrf=""
        )
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        return HTMLResponse(html, status_code=status, headers=headers)

    @app.post("/login")
    async def login(request: Request) -> Response:
        """A wrong key is 401; an address or key prefix that failed too often is 429 with
        ``Retry-After`` (``llm_bot.auth_throttle``), a locked address before its form is
        read."""
        address = request.client.host if request.client is not None else ""
        wait = inspector.throttle.address_locked(address)
        if wait is None:
            key = (await form_of(request)).get("key", "")
            scope = inspector.keys.scope_for(key)
            if scope is not None:
                return logged_in(request, scope)
            wait = inspector.throttle.failed(address, key)
            if wait is None:
                return login_refused("That key is not configured.", 401)
        return login_refused(
            f"Too many failed logins: try again in {wait} s.", 429, retry_after=wait
        )

    def logged_in(request: Request, scope: Scope) -> Response:
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
        await csrf_checked_form(request, session)
        inspector.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

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
        number = request.query_params.get("page", "1")
        page_number = int(number) if number.isdigit() and int(number) > 0 else 1
        data = await views.tenant_view(inspector, tenant_id, page_number)
        return page(request, "tenant.html", data, session)

    @app.get("/t/{tenant_id}/u/{user_id}")
    async def user_page(request: Request, tenant_id: str, user_id: str) -> Response:
        session = session_of(request)
        allowed(session, tenant_id, user_id)
        number = request.query_params.get("page", "1")
        page_number = int(number) if number.isdigit() and int(number) > 0 else 1
        data = await views.user_view(inspector, tenant_id, user_id, page_number)
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

    action_routes.register(app, pages)
    dlq_routes.register(app, pages)
    return app

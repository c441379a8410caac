"""The inspector's login and logout, and its metrics (no login: counts only)."""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from llm_bot.inspector.access_keys import Scope
from llm_bot.inspector.routing import Pages, csrf_checked_form, form_of
from llm_bot.inspector.sessions import COOKIE


def register(app: FastAPI, pages: Pages) -> None:
    inspector, templates = pages.inspector, pages.templates
    session_of, page = pages.session_of, pages.page

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

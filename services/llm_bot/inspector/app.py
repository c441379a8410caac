"""The inspector's HTTP app: login, pages and their JSON twins (``?format=json``), actions.

Security (SPEC 7.3): a session cookie (``HttpOnly``, ``SameSite=Strict``) opened with an
inspector key; every POST carries the session's CSRF token; a URL naming a tenant the key
does not cover, or an id that does not match the id pattern, is 404 (the same answer as a
tenant that does not exist: no existence oracle); a CSP without inline script (only the package's own files); no message
text in logs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.resources import files

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.staticfiles import StaticFiles

from llm_bot.inspector import action_routes, dlq_routes, login_routes, page_routes
from llm_bot.inspector.rendering import environment
from llm_bot.inspector.routing import Pages, wants_json
from llm_bot.inspector.wiring import Inspector

CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""Scripts only from the package's own files (``static/live.js``): no inline script, no
``javascript:`` URL, no event handler attribute runs."""


def create_app(inspector: Inspector) -> FastAPI:
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

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 303 and exc.headers:
            return RedirectResponse(exc.headers["Location"], status_code=303)
        if wants_json(request):
            return JSONResponse({"error": exc.status_code}, status_code=exc.status_code)
        html = templates.get_template("error.html").render(status=exc.status_code, session=None)
        return HTMLResponse(html, status_code=exc.status_code)

    login_routes.register(app, pages)
    page_routes.register(app, pages)
    action_routes.register(app, pages)
    dlq_routes.register(app, pages)
    return app

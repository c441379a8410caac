"""What every route of the inspector does first: find the session, check the ids and the
tenant against its key (404 otherwise: no existence oracle), and answer with the page or
its JSON twin (``?format=json``) from the same data."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from fastapi import HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from jinja2 import Environment

from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.inspector.sessions import COOKIE, Session
from llm_bot.inspector.wiring import Inspector

_ID = re.compile(ID_PATTERN)


def checked(*ids: str) -> None:
    """404 unless every id matches the id pattern."""
    for value in ids:
        if not _ID.fullmatch(value):
            raise HTTPException(status_code=404)


def allowed(session: Session, tenant_id: str, *ids: str) -> None:
    """404 unless the ids are valid and the session's key covers the tenant."""
    checked(tenant_id, *ids)
    if not session.scope.allows(tenant_id):
        raise HTTPException(status_code=404)


def wants_json(request: Request) -> bool:
    return request.query_params.get("format") == "json"


async def form_of(request: Request) -> dict[str, str]:
    body = (await request.body()).decode(errors="replace")
    return {name: values[0] for name, values in parse_qs(body).items()}


async def csrf_checked_form(request: Request, session: Session) -> dict[str, str]:
    """The POST's form; 403 unless it carries the session's CSRF token."""
    form = await form_of(request)
    if not session.csrf_matches(form.get("csrf")):
        raise HTTPException(status_code=403)
    return form


@dataclass(frozen=True)
class Pages:
    inspector: Inspector
    templates: Environment

    def session_of(self, request: Request) -> Session:
        """The request's session; 401 (JSON) or a redirect to the login page without one."""
        session = self.inspector.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            if wants_json(request):
                raise HTTPException(status_code=401)
            raise HTTPException(status_code=303, headers={"Location": "/login"})
        return session

    def page(
        self,
        request: Request,
        template: str,
        data: dict[str, Any],
        session: Session | None,
        status_code: int = 200,
    ) -> Response:
        if wants_json(request):
            return JSONResponse(data, status_code=status_code)
        html = self.templates.get_template(template).render(
            data=data, session=session, csrf=session.csrf if session else ""
        )
        return HTMLResponse(html, status_code=status_code)

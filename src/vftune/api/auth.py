"""Bearer-token authentication: writes always need it; a non-loopback listener needs it everywhere.

The token is the `token` file in the agent's state directory (vftune/paths.py), created 0600
at first start; the libvirt hook and `vftune status` read the same file.
"""

from __future__ import annotations

import hmac

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

bearer = HTTPBearer(auto_error=False, description="The `token` file in the agent's state directory")
CHALLENGE = {"WWW-Authenticate": "Bearer"}


def check(token: str | None, presented: str | None) -> str | None:
    """Why a request is refused (one line), or None if the token matches."""
    if token is None:
        return "writes are disabled: the agent has no token"
    if presented is None:
        return "missing Authorization: Bearer <token> (the token file in the agent's state directory)"
    if not hmac.compare_digest(presented.encode("utf-8", "replace"), token.encode()):
        return "wrong bearer token"
    return None


def require_token(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Dependency for every route that changes state."""
    presented = credentials.credentials if credentials is not None else None
    problem = check(request.app.state.token, presented)
    if problem is not None:
        raise StarletteHTTPException(401 if presented is None else 403, problem, headers=CHALLENGE)


def _bearer_from(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, cred = value.decode("latin-1").partition(" ")
            return cred.strip() if scheme.lower() == "bearer" and cred.strip() else None
    return None


class TokenForEverything:
    """Every request needs the token, documentation and health included: a listener beyond
    loopback shows guest names and UUIDs to whoever reaches it."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            presented = _bearer_from(list(scope.get("headers") or ()))
            problem = check(self.token, presented)
            if problem is not None:
                status = 401 if presented is None else 403
                await JSONResponse({"error": problem}, status_code=status, headers=CHALLENGE)(scope, receive, send)
                return
        await self.app(scope, receive, send)

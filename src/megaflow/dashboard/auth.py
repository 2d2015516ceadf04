"""The dashboard's door: the bearer token, a session cookie and one-time login links.

A request is let in when it carries ``Authorization: Bearer <token>``
(:func:`megaflow.rpc.auth.check_bearer`, the same check as the other
services) or the session cookie. The cookie holds an HMAC of the token, not
the token, and is set by the login page (the token typed in) or by a
one-time link the CLI prints (``/login?code=...``; each code works once).
Changing the token ends every session. Without either, pages redirect to the
login page and everything else (API, stream, static files) gets 401.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from megaflow.core.errors import ConfigError
from megaflow.rpc.auth import MIN_TOKEN_CHARS, check_bearer

COOKIE = "megaflow_dashboard"
OPEN_PATHS = frozenset({"/login"})


class DashboardAuth:
    """Checks requests against one token; issues and redeems one-time login codes."""

    def __init__(self, token: str) -> None:
        if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
            raise ConfigError(
                f"the dashboard's token must be at least {MIN_TOKEN_CHARS} characters "
                "without whitespace"
            )
        self._token = token
        self._session = hmac.new(token.encode(), b"megaflow-dashboard-session", hashlib.sha256)
        self._codes: set[str] = set()

    @property
    def session_value(self) -> str:
        """What the session cookie holds."""
        return self._session.hexdigest()

    def allows(self, authorization: str | None, cookie: str | None) -> bool:
        if authorization and check_bearer(authorization, self._token):
            return True
        return cookie is not None and hmac.compare_digest(
            cookie.encode(), self.session_value.encode()
        )

    def token_matches(self, token: str) -> bool:
        return hmac.compare_digest(token.strip().encode(), self._token.encode())

    def new_code(self) -> str:
        """A one-time login code; redeeming it sets the session cookie."""
        code = secrets.token_urlsafe(24)
        self._codes.add(code)
        return code

    def redeem(self, code: str) -> bool:
        """True once for each issued code."""
        for known in list(self._codes):
            if hmac.compare_digest(known.encode(), code.encode()):
                self._codes.discard(known)
                return True
        return False

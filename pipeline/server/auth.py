"""Bearer tokens: only their SHA-256 is configured, each with scopes, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser
from starlette.requests import HTTPConnection

from pipeline.config import SCOPES, TokenSetting
from pipeline.errors import UsageError


@dataclass(frozen=True)
class Caller(BaseUser):
    """Who made a request, as far as their token says."""

    name: str
    scopes: frozenset[str]

    @property
    def is_authenticated(self) -> bool:
        """A caller is one a token named (or anyone, on a server without tokens)."""
        return True

    @property
    def display_name(self) -> str:
        """The token's name."""
        return self.name

    def may_read(self, record: dict[str, str]) -> bool:
        """Whether this caller may see a record: any with read or admin, else its own."""
        return bool(self.scopes & {"read", "admin"}) or record.get("owner") == self.name


def digest(secret: str) -> str:
    """What the configuration holds for a token."""
    return hashlib.sha256(secret.encode()).hexdigest()


def token_from_file(path: Path) -> TokenSetting:
    """A token file (the secret on its first line) as a token with every scope."""
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read token file {path}: {exc}") from None
    if len(secret) < 16:
        raise UsageError(f"token file {path}: a token needs at least 16 characters")
    return TokenSetting(name=path.name, sha256=digest(secret), scopes=SCOPES)


class Tokens:
    """The configured tokens."""

    def __init__(self, tokens: tuple[TokenSetting, ...]) -> None:
        self._tokens = tokens

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def caller(self, authorization: str | None) -> Caller | None:
        """The caller of an `Authorization: Bearer …` header, or None when it is no token."""
        scheme, _, secret = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            return None
        presented = digest(secret.strip()).encode()
        found = None
        for token in self._tokens:  # every token is compared: the time tells nothing
            if hmac.compare_digest(presented, token.sha256.encode()):
                found = token
        return None if found is None else Caller(found.name, frozenset(found.scopes))


EVERYONE = Caller("anyone", frozenset(SCOPES))  # the caller of a server without tokens


class TokenBackend(AuthenticationBackend):
    """Starlette's authentication of each request by its bearer token: `request.user` is the
    Caller, `request.auth.scopes` what it may do (admin may do everything)."""

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        if not self.tokens:
            return AuthCredentials(list(SCOPES)), EVERYONE
        found = self.tokens.caller(conn.headers.get("authorization"))
        if found is None:
            return None
        scopes = SCOPES if "admin" in found.scopes else tuple(sorted(found.scopes))
        return AuthCredentials(list(scopes)), found

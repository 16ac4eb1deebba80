"""Password hashes (never a password) for the user DDL events: PBKDF2-HMAC-SHA256 from
hashlib with a random 16-byte salt, stored as `pbkdf2_sha256$<iterations>$<salt>$<hash>`
(hex), checked in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

ITERATIONS = 100_000
SCHEME = "pbkdf2_sha256"


def hash_password(password: str, iterations: int = ITERATIONS) -> str:
    """Returns a salted hash of `password` (a fresh salt each call)."""
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{SCHEME}${iterations}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    """Returns whether `password` is the one `stored` (a hash_password result) was made of;
    False for a malformed `stored`."""
    try:
        scheme, iterations, salt, digest = stored.split("$")
        if scheme != SCHEME:
            return False
        given = hashlib.pbkdf2_hmac(
            "sha256", password.encode(), bytes.fromhex(salt), int(iterations)
        )
    except ValueError:
        return False
    return hmac.compare_digest(given.hex(), digest)

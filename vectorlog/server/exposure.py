"""Who may reach a server: the environment variables naming its token and TLS files, and the
rule that an address other than loopback is served only with a token (or users). Kept apart
from serve.py, which imports the whole server, so `vectorlog run` checks its address at once."""

from __future__ import annotations

import ipaddress

from vectorlog.core.errors import InvalidArgument

#: the variable holding the token when --token is not given ("user:password" or an API key)
TOKEN_ENV = "VECTORLOG_TOKEN"
#: the variables naming the PEM certificate and key when --tls-cert / --tls-key are not given
TLS_CERT_ENV, TLS_KEY_ENV = "VECTORLOG_TLS_CERT", "VECTORLOG_TLS_KEY"


def is_loopback(host: str) -> bool:
    """Returns whether `host` names this machine only (localhost or a loopback address)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_open(host: str, token: str | None, authorization: bool = False) -> None:
    """Raises InvalidArgument if `host` is not a loopback address and there is neither a
    token nor authorization: without them vectorlog serves only this machine (with TLS too:
    TLS hides the traffic, it does not say who may call)."""
    if token and authorization:
        raise InvalidArgument("--token and --authorization exclude each other: users log in")
    if not (token or authorization) and not is_loopback(host):
        raise InvalidArgument(
            f"serving {host!r} without a token is refused: pass --token or set {TOKEN_ENV}"
        )

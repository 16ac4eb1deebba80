"""The server's TLS certificate and key (PEM files), checked before anything starts; gRPC and
REST (uvicorn) both serve with them."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from vectorlog.core.errors import InvalidArgument


@dataclass(frozen=True)
class TlsFiles:
    """A PEM certificate chain (`cert`) and its private key (`key`), both readable and
    matching (see `tls_files`)."""

    cert: Path
    key: Path

    def read(self) -> tuple[bytes, bytes]:
        """Returns (private key, certificate chain) as PEM bytes, as grpc.ssl_server_credentials
        takes them. Raises InvalidArgument naming a file that cannot be read (any more)."""
        return _read(self.key, "key"), _read(self.cert, "certificate")


def tls_files(cert: str | None, key: str | None) -> TlsFiles | None:
    """Returns the TLS files, or None when neither is given (plaintext). Raises
    InvalidArgument if only one is given, a file is missing or unreadable, or they are not a
    PEM certificate and its matching private key (names the files)."""
    if not cert and not key:
        return None
    if not cert or not key:
        given, missing = ("--tls-cert", "--tls-key") if cert else ("--tls-key", "--tls-cert")
        raise InvalidArgument(f"TLS needs both a certificate and a key: {given} without {missing}")
    files = TlsFiles(Path(cert), Path(key))
    files.read()
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(files.cert, files.key)
    except ssl.SSLError as exc:
        raise InvalidArgument(
            f"TLS certificate {str(files.cert)!r} and key {str(files.key)!r} are not a PEM "
            f"certificate and its private key: {exc}"
        ) from None
    return files


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidArgument(f"cannot read the TLS {what} {str(path)!r}: {exc.strerror}") from None

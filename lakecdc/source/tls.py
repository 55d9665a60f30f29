"""TLS of the connections to MySQL: the driver settings each ``sslMode`` of :class:`TlsConfig` needs, and what a
failed handshake or a refused password exchange means, in errors that name the host, the mode and the fix (never a
password).

- ``DISABLED``: no TLS.
- ``PREFERRED`` (the default): TLS when the server offers it, no certificate check; PyMySQL's default mode, whose
  context every connection shares (lakecdc.source.connection.Connection). With a client certificate, a context of
  its own that presents it.
- ``REQUIRED``: TLS or fail, no certificate check.
- ``VERIFY_CA``: and the server's certificate chain must lead to a trusted CA (the trust store, else the system's
  CA certificates).
- ``VERIFY_IDENTITY``: and the certificate must be issued for the host connected to (``source.hostname``, a DNS
  name or an IP address of its subjectAltName).

A context is built once per configuration and shared by every connection that uses it (loading a CA bundle costs
tens of milliseconds; a run opens many connections); it is built again when a file it was read from changes, so
rotated certificates are picked up by a long-lived process (a Dagster code server, the sensor).

``caching_sha2_password`` (MySQL 8's default plugin, the only one of 8.4) sends the password itself when the server
has not cached the user's hash (after a restart, a password change): over TLS as it is, without TLS encrypted with
the server's RSA public key. As MySQL Connector/J, lakecdc fetches that key from the server only when
``allowPublicKeyRetrieval`` allows it (whoever answers on the address could hand over its own key and read the
password) or takes it from ``serverRSAPublicKeyFile``; otherwise the connection fails with an error saying so. The
RSA encryption needs the ``cryptography`` package, a declared dependency of lakecdc.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import ssl
import tempfile
from typing import Any

from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat, pkcs12
from pymysql import _auth
from pymysql.constants import CR
from pymysql.err import OperationalError

from lakecdc.errors import SourceError
from lakecdc.source.options import JDBC, TlsConfig, jks_refusal

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_TRUST = JDBC + "trustCertificateKeyStoreUrl"
_CLIENT = JDBC + "clientCertificateKeyStoreUrl"
_RSA_KEY = JDBC + "serverRSAPublicKeyFile"


def driver_settings(tls: TlsConfig) -> dict[str, Any]:
    """Keyword arguments of PyMySQL's connection for ``tls`` (none for PREFERRED without a client certificate:
    PyMySQL's own mode). Unreadable key stores raise SourceError naming the option."""
    settings: dict[str, Any] = {}
    mode = tls.mode
    if mode == "DISABLED":
        settings["ssl_disabled"] = True
    elif mode != "PREFERRED" or tls.client_store is not None:
        settings["ssl"] = _context(tls, _stamps(tls))
    key_file = tls.server_rsa_public_key_file
    if key_file is not None:
        settings["server_public_key"] = _public_key(key_file, _stamp(key_file, _RSA_KEY))
    return settings


def _stamp(path: str, key: str) -> tuple[str, int, int]:
    """What identifies a version of the file at ``path`` (a changed file builds a new context)."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise SourceError(f"MySQL source: {key}: cannot read {path}: {exc.strerror or exc}") from None
    return path, stat.st_mtime_ns, stat.st_size


def _stamps(tls: TlsConfig) -> tuple:
    return tuple(_stamp(path, key) for path, key in ((tls.trust_store, _TRUST), (tls.client_store, _CLIENT))
                 if path is not None)


@functools.lru_cache(maxsize=16)
def _context(tls: TlsConfig, stamps: tuple) -> ssl.SSLContext:
    """The TLS context of ``tls`` (``stamps``: the versions of its files, part of the cache key)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # As PyMySQL: Python 3.13 checks certificates strictly (RFC 5280), which the CA certificates MySQL generates for
    # itself (auto_generate_certs) fail; the chain and the name are still checked.
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    if tls.verifies:
        ctx.check_hostname = tls.mode == "VERIFY_IDENTITY"
        ctx.verify_mode = ssl.CERT_REQUIRED
        if tls.trust_store is not None:
            _load_trust_store(ctx, tls)
        else:
            ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.client_store is not None:
        _load_client_store(ctx, tls)
    return ctx


def _store_type(path: str, given: str | None, key: str) -> tuple[str, bytes]:
    """The key store's type (the one given, else PEM or PKCS12 by the file's content) and its bytes."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SourceError(f"MySQL source: {key}: cannot read {path}: {exc.strerror or exc}") from None
    if data.startswith(_JKS_MAGIC):
        raise SourceError(f"MySQL source: {key}: {path} is a JKS key store. {jks_refusal(path)}")
    kind = given or ("PEM" if b"-----BEGIN" in data else "PKCS12")
    return kind, data


def _pkcs12(data: bytes, password: str, path: str, key: str) -> pkcs12.PKCS12KeyAndCertificates:
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise SourceError(f"MySQL source: {key}: cannot open {path} as a PKCS12 key store: the password "
                          f"({key.replace('Url', 'Password')}) is wrong, or the file is not PKCS12") from None


def _load_trust_store(ctx: ssl.SSLContext, tls: TlsConfig) -> None:
    path = tls.trust_store
    assert path is not None
    kind, data = _store_type(path, tls.trust_store_type, _TRUST)
    if kind == "PKCS12":
        store = _pkcs12(data, tls.trust_store_password, path, _TRUST)
        certificates = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certificates.append(store.cert.certificate)
        cadata = "".join(c.public_bytes(Encoding.PEM).decode("ascii") for c in certificates)
    else:
        cadata = data.decode("ascii", "replace")
    try:
        ctx.load_verify_locations(cadata=cadata)
    except (ssl.SSLError, ValueError) as exc:
        raise SourceError(f"MySQL source: {_TRUST}: {path} holds no CA certificate lakecdc can read "
                          f"({_ssl_reason(exc)}); give a PEM bundle of the CA certificates or a PKCS12 trust store")\
            from None


def _load_client_store(ctx: ssl.SSLContext, tls: TlsConfig) -> None:
    path = tls.client_store
    assert path is not None
    kind, data = _store_type(path, tls.client_store_type, _CLIENT)
    password = tls.client_store_password
    if kind == "PEM":
        _load_cert_chain(ctx, path, lambda: password, path)
        return
    store = _pkcs12(data, password, path, _CLIENT)
    if store.key is None or store.cert is None:
        raise SourceError(f"MySQL source: {_CLIENT}: {path} holds no private key with its certificate")
    # ssl loads a certificate chain only from a file: a private directory holds it for the moment of loading, the
    # key encrypted with a password made for this once (the plain key never reaches a disk)
    once = secrets.token_hex(32)
    pem = store.cert.certificate.public_bytes(Encoding.PEM)
    pem += b"".join(c.certificate.public_bytes(Encoding.PEM) for c in store.additional_certs)
    pem += store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(once.encode()))
    with tempfile.TemporaryDirectory(prefix="lakecdc-tls-") as private:
        chain = os.path.join(private, "client.pem")
        with open(os.open(chain, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(pem)
        _load_cert_chain(ctx, chain, lambda: once, path)


def _load_cert_chain(ctx: ssl.SSLContext, chain: str, password, path: str) -> None:
    """``password`` is a function: with it an encrypted key without a password fails instead of OpenSSL asking for
    one on the terminal."""
    try:
        ctx.load_cert_chain(chain, password=password)
    except (ssl.SSLError, ValueError) as exc:
        raise SourceError(f"MySQL source: {_CLIENT}: cannot load the client certificate from {path} "
                          f"({_ssl_reason(exc)}): a PEM file must hold the certificate and its private key, an "
                          f"encrypted key needs {JDBC}clientCertificateKeyStorePassword") from None


@functools.lru_cache(maxsize=4)
def _public_key(path: str, stamp: tuple) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _ssl_reason(exc: BaseException) -> str:
    """An SSL error's text without OpenSSL's source location."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return exc.verify_message.rstrip(".")
    return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(exc)) or type(exc).__name__


def _ssl_error(exc: BaseException) -> ssl.SSLError | None:
    """The SSL error behind a driver error (PyMySQL wraps it, or raises its own error while handling it)."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 5:
        if isinstance(cause, ssl.SSLError):
            return cause
        cause = getattr(cause, "original_exception", None) or cause.__cause__ or cause.__context__
        seen += 1
    return None


def tls_failure(exc: BaseException, address: str, tls: TlsConfig) -> SourceError | None:
    """The error to raise for a connection attempt that failed at TLS (None when ``exc`` is not about TLS)."""
    mode = tls.mode
    where = f"TLS to MySQL at {address} failed (sslMode {mode})"
    cause = _ssl_error(exc)
    if isinstance(cause, ssl.SSLCertVerificationError):
        reason = _ssl_reason(cause)
        if "mismatch" in reason.lower():  # "Hostname mismatch" / "IP address mismatch"
            fix = ("connect with a host name the certificate is issued for (source.hostname), or use sslMode "
                   "VERIFY_CA, which checks the CA but not the name")
        else:
            fix = (f"check that {_TRUST} holds the CA that signed the server's certificate (managed services publish "
                   "theirs, see operations.md)" if tls.trust_store is not None else
                   f"give the CA that signed it as {_TRUST} (the system's CA certificates were used)")
        return SourceError(f"{where}: the server's certificate was refused: {reason}; {fix}")
    if cause is not None:
        reason = _ssl_reason(cause)
        fix = ""
        if "certificate required" in reason.lower() or "handshake failure" in reason.lower():
            fix = (f"; the server may want a client certificate ({_CLIENT})" if tls.client_store is None else
                   f"; check that the server trusts the CA of the client certificate ({_CLIENT})")
        return SourceError(f"{where}: {reason}{fix}")
    if isinstance(exc, OperationalError) and exc.args and exc.args[0] == CR.CR_SSL_CONNECTION_ERROR:
        return SourceError(f"{where}: the server does not offer TLS; turn TLS on at the server (ssl_cert and ssl_key; "
                           f"managed MySQL services have it on), or lower {JDBC}sslMode to PREFERRED only where the "
                           "network between here and the server is trusted")
    return None


class CachingSha2Password:
    """PyMySQL's ``caching_sha2_password`` exchange (an authentication handler of its ``auth_plugin_map``), except that
    on a connection without TLS the server's RSA public key is fetched only when ``allowPublicKeyRetrieval`` is set
    (Connector/J's rule); with ``serverRSAPublicKeyFile`` the key is known. Everything else is PyMySQL's own code:
    the handler only looks at the server's answer to the fast path before handing it on.

    Not tested against a MySQL server (the tests run on MariaDB, which has no caching_sha2_password); read against
    PyMySQL 1.2.4's ``_auth.caching_sha2_password_auth``, which constraints.txt pins."""

    _FULL_AUTH = 4  # the server's answer to the fast path: send the password in full

    def __init__(self, conn) -> None:
        self.conn = conn

    def authenticate(self, pkt):
        conn = self.conn
        if conn.password and pkt.is_auth_switch_request():
            # the server switched to this plugin: the fast path with its new salt first, as PyMySQL does
            conn.salt = pkt.read_all()
            if conn.salt.endswith(b"\0"):
                conn.salt = conn.salt[:-1]
            pkt = _auth._roundtrip(conn, _auth.scramble_caching_sha2(conn.password, conn.salt))
        data = pkt.get_all_data()
        full = conn.password and pkt.is_extra_auth_data() and len(data) > 1 and data[1] == self._FULL_AUTH
        tls: TlsConfig = getattr(conn, "lakecdc_tls", TlsConfig())
        if full and not conn._secure and not conn.server_public_key and not tls.allow_public_key_retrieval:
            raise OperationalError(CR.CR_AUTH_PLUGIN_ERR, (
                f"MySQL at {conn.host}:{conn.port} asks for the full password of a caching_sha2_password user (it "
                "has not cached the user's credentials since it started or since the password changed), and this "
                "connection has no TLS: use TLS (a server with TLS on; sslMode PREFERRED or stricter), or give the "
                f"server's RSA public key as {_RSA_KEY}, or set {JDBC}allowPublicKeyRetrieval: true to fetch it from "
                "the server (whoever answers on the address could then read the password)"))
        return _auth.caching_sha2_password_auth(conn, pkt)


AUTH_PLUGINS = {"caching_sha2_password": CachingSha2Password}

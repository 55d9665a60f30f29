"""Certificates for the TLS tests, made in the test itself with ``cryptography``: a CA, a server certificate for the
IP address 127.0.0.1 only (so that ``localhost``, which reaches the same server, is a wrong host name), a client
certificate for users created ``REQUIRE X509``, and a second CA that signed none of them. Written as PEM files and
PKCS12 stores (with a password) under one directory."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (BestAvailableEncryption, Encoding, NoEncryption,
                                                          PrivateFormat, pkcs12)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # PEM: the CA that signed the server's and the client's certificates
    other_ca: Path  # PEM: a CA that signed neither
    server_cert: Path
    server_key: Path
    client_pem: Path  # the client certificate and its key (encrypted with ``password``) in one PEM file
    trust_p12: Path  # PKCS12 trust store holding ``ca``, protected by ``password``
    client_p12: Path  # PKCS12 key store: the client certificate and key, protected by ``password``
    password: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key, issuer: str, issuer_key, *, ca: bool = False,
                 san: list[x509.GeneralName] | None = None, usage=None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                              critical=False))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_tls_files(directory: Path, password: str) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, other_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(4))
    ca = _certificate("lakecdc test CA", ca_key, "lakecdc test CA", ca_key, ca=True)
    other = _certificate("some other CA", other_key, "some other CA", other_key, ca=True)
    server = _certificate("127.0.0.1", server_key, "lakecdc test CA", ca_key,
                          san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
                          usage=ExtendedKeyUsageOID.SERVER_AUTH)
    client = _certificate("lakecdc client", client_key, "lakecdc test CA", ca_key,
                          usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    files = TlsFiles(*(directory / name for name in ("ca.pem", "other-ca.pem", "server-cert.pem", "server-key.pem",
                                                     "client.pem", "trust.p12", "client.p12")), password=password)
    files.ca.write_bytes(ca.public_bytes(Encoding.PEM))
    files.other_ca.write_bytes(other.public_bytes(Encoding.PEM))
    files.server_cert.write_bytes(server.public_bytes(Encoding.PEM))
    files.server_key.write_bytes(server_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    encrypted = BestAvailableEncryption(password.encode())
    files.client_pem.write_bytes(client.public_bytes(Encoding.PEM)
                                 + client_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, encrypted))
    files.trust_p12.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca], encrypted))
    files.client_p12.write_bytes(pkcs12.serialize_key_and_certificates(b"client", client_key, client, None,
                                                                       encrypted))
    return files


def server_flags(files: TlsFiles) -> tuple[str, ...]:
    """MariaDB's TLS flags for the server certificate of ``files``."""
    return (f"--ssl-ca={files.ca}", f"--ssl-cert={files.server_cert}", f"--ssl-key={files.server_key}")

"""TLS on every connection to MySQL (``jdbc.properties.sslMode`` and Connector/J's key store properties), against a
private MariaDB serving TLS with a CA, server and client certificates made in the test (tests/tls_certs.py).

The proof that every connection honours the setting: the pipelines read as users created ``REQUIRE X509`` or
``REQUIRE SSL``, which the server refuses on any connection without TLS (and, for X509, without a client certificate
its CA signed): one connection opened otherwise would fail the run. The first test shows that refusal, then runs the
snapshot (parallel chunk readers), the binlog read, the look-back for an XA transaction prepared before the snapshot,
the status scan, the checks and the binlog positions of the startup modes as such a user. The Dagster run, its checks
and its sensor use TLS through MySqlResource in tests/test_secrets.py."""

from __future__ import annotations

import threading
import uuid

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import PipelineConfigError, SourceError
from lakecdc.model import TableId
from lakecdc.runtime import check_pipeline, pipeline_status, run_micro_batch
from lakecdc.source import MySqlSource, chunk_reader
from lakecdc.source.connection import connect, query
from tests.conftest import new_database
from tests.crosscheck import assert_same_rows

SECRET = f"Pw-{uuid.uuid4().hex}-Tt5"  # the MySQL users' password: found in an error means leaked
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: {user}
  password: ${{LAKECDC_TLS_PW}}
  tables: {db}.\\.*
  server-id: 5890-5894
  scan.incremental.snapshot.chunk.size: 64
{tls}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: tls {db}
  parallelism: 2
"""
GRANTS = "SELECT, REPLICATION SLAVE, BINLOG MONITOR"


def tls_lines(**properties: str) -> str:
    return "".join(f"  jdbc.properties.{key}: {value}\n" for key, value in properties.items())


@pytest.fixture
def env(monkeypatch, tls_files):
    monkeypatch.setenv("LAKECDC_TLS_PW", SECRET)
    monkeypatch.setenv("LAKECDC_TLS_KEY_PW", tls_files.password)


@pytest.fixture
def tls_db(tls_server):
    """A new database on ``tls_server``; an XA transaction a failed test left prepared is rolled back first (it
    would hold its locks, and the database could not be dropped)."""
    from tests.test_source_nothing_skipped import roll_back_prepared_xa

    with new_database(tls_server) as name:
        try:
            yield name
        finally:
            roll_back_prepared_xa(tls_server)


@pytest.fixture
def user(tls_server):
    """``make(require)``: a user created with ``REQUIRE {require}``, with a CDC source's grants; dropped after."""
    made = []

    def make(require: str) -> str:
        name = f"tls_{uuid.uuid4().hex[:8]}"
        tls_server.execute(f"CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY '{SECRET}' REQUIRE {require}")
        tls_server.execute(f"GRANT {GRANTS} ON *.* TO '{name}'@'127.0.0.1'")
        made.append(name)
        return name

    yield make
    for name in made:
        tls_server.execute(f"DROP USER IF EXISTS '{name}'@'127.0.0.1'")


def pipeline(server, db, user, tmp_path, tls: str, host: str = "127.0.0.1"):
    text = PIPELINE.format(host=host, port=server.port, user=user, db=db, tls=tls, warehouse=tmp_path / "wh")
    return parse_pipeline(text)


def written(tmp_path) -> list[str]:
    """What a run wrote to the warehouse (nothing when it failed before reading)."""
    return sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "wh").rglob("*")) \
        if (tmp_path / "wh").exists() else []


def ssl_version(options) -> str:
    conn = connect(options)
    try:
        return query(conn, "SHOW SESSION STATUS LIKE 'Ssl_version'")[0][1]
    finally:
        conn.close()


def test_verify_identity_as_an_x509_user_on_every_connection(tls_server, tls_db, tls_files, user, env, tmp_path,
                                                              monkeypatch):
    """VERIFY_IDENTITY with the CA and a client certificate (PEM files, the key encrypted): snapshot with two
    parallel chunk readers, binlog, an XA transaction prepared before the snapshot and committed after it (found by
    the look-back), status, checks and the startup positions, all as a REQUIRE X509 user."""
    from tests.test_source_nothing_skipped import READ_COMMITTED, prepare_xa, resolve_xa

    x509 = user("X509")
    tls = tls_lines(sslMode="VERIFY_IDENTITY", trustCertificateKeyStoreUrl=f"file:{tls_files.ca}",
                    clientCertificateKeyStoreUrl=f"file://{tls_files.client_pem}",
                    clientCertificateKeyStorePassword="${LAKECDC_TLS_KEY_PW}")
    config = pipeline(tls_server, tls_db, x509, tmp_path, tls)
    assert ssl_version(config.source).startswith("TLSv1.")
    # the user is refused without TLS, and with TLS but without the client certificate: the proof below is real
    for refused in (tls_lines(sslMode="DISABLED"),
                    tls_lines(sslMode="VERIFY_IDENTITY", trustCertificateKeyStoreUrl=f"file:{tls_files.ca}")):
        with pytest.raises(SourceError, match=r"Access denied.*REQUIRE X509"):
            connect(pipeline(tls_server, tls_db, x509, tmp_path, refused).source)

    tls_server.execute("CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(20))", database=tls_db)
    tls_server.execute("INSERT INTO items SELECT seq, CONCAT('v', seq) FROM seq_1_to_300", database=tls_db)
    xa = prepare_xa(tls_server, tls_db, "tls-xa", ["INSERT INTO items VALUES (1000, 'xa')"],
                    session=(READ_COMMITTED,))
    readers = set()  # the threads that read chunks
    monkeypatch.setattr(chunk_reader, "select_connection_hook",
                        lambda *_: readers.add(threading.current_thread().name))
    run_micro_batch(config)  # the snapshot: 5 chunks
    assert len(readers) == 2, readers
    resolve_xa(xa, "tls-xa", "COMMIT")  # its prepare lies before the snapshot's position
    tls_server.execute("UPDATE items SET v = 'changed' WHERE id <= 10", database=tls_db)
    tls_server.execute("DELETE FROM items WHERE id BETWEEN 291 AND 300", database=tls_db)
    status = {t.target: t for t in pipeline_status(config).tables}  # the status scans the binlog
    assert status[TableId(tls_db, "items")].behind
    run_micro_batch(config)  # the binlog, and the look-back for the XA prepare (its row is in no other event)
    assert assert_same_rows(tls_server, config.sink.catalog_options, tls_db, "items") == 291
    checks = check_pipeline(config)
    assert checks and all(c.passed for c in checks), [c.to_json() for c in checks if not c.passed]
    source = MySqlSource(config.source)
    assert source.earliest_offset() <= source.offset_at_timestamp(0)
    assert source.binary_logs()


def test_legacy_verify_server_certificate_with_pkcs12_as_a_require_ssl_user(tls_server, mariadb, tls_db, tls_files,
                                                                            user, env, tmp_path):
    """A Flink CDC pipeline's legacy properties (useSSL + verifyServerCertificate: VERIFY_CA) with a PKCS12 trust
    store, connecting to ``localhost``, a name the certificate does not carry (VERIFY_CA checks the CA only), as a
    REQUIRE SSL user; a REQUIRE X509 user with a PKCS12 client store under REQUIRED and PREFERRED; PREFERRED with a
    client certificate against a server without TLS (plaintext)."""
    tls_server.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)", database=tls_db)
    tls_server.execute("INSERT INTO items VALUES (1, 1), (2, 2)", database=tls_db)
    ssl_user = user("SSL")
    with pytest.raises(SourceError, match=r"Access denied.*REQUIRE SSL"):  # refused without TLS
        connect(pipeline(tls_server, tls_db, ssl_user, tmp_path, tls_lines(sslMode="DISABLED")).source)
    config = pipeline(tls_server, tls_db, ssl_user, tmp_path, tls_lines(
        useSSL="true", verifyServerCertificate="true", trustCertificateKeyStoreUrl=f"file:{tls_files.trust_p12}",
        trustCertificateKeyStoreType="PKCS12", trustCertificateKeyStorePassword="${LAKECDC_TLS_KEY_PW}"),
        host="localhost")
    assert config.source.tls.mode == "VERIFY_CA"
    # the user was created for 127.0.0.1: MariaDB matches the client's address, which localhost's is
    run_micro_batch(config)
    tls_server.execute("UPDATE items SET v = 20 WHERE id = 2", database=tls_db)
    run_micro_batch(config)
    assert assert_same_rows(tls_server, config.sink.catalog_options, tls_db, "items") == 2

    client = tls_lines(clientCertificateKeyStoreUrl=f"file:{tls_files.client_p12}",
                       clientCertificateKeyStorePassword="${LAKECDC_TLS_KEY_PW}")
    x509 = user("X509")
    for mode in ("REQUIRED", "PREFERRED"):  # the client certificate is presented in both
        config = pipeline(tls_server, tls_db, x509, tmp_path, tls_lines(sslMode=mode) + client)
        assert ssl_version(config.source).startswith("TLSv1.")
    # PREFERRED with a client certificate, against a server without TLS: plaintext, as Connector/J
    plain = parse_pipeline(PIPELINE.format(host="127.0.0.1", port=mariadb.port, user="root", db="d", tls=client,
                                           warehouse=tmp_path / "wh"),
                           env={"LAKECDC_TLS_PW": "", "LAKECDC_TLS_KEY_PW": tls_files.password})
    assert ssl_version(plain.source) == ""


def failure(config) -> str:
    """The error of a run that must fail at its first connection."""
    with pytest.raises(SourceError) as info:
        run_micro_batch(config)
    return str(info.value)


def test_tls_failures_name_host_mode_and_reason_before_anything_is_read(tls_server, mariadb, tls_db, fresh_db,
                                                                         tls_files, user, env, tmp_path):
    """A CA that did not sign the server's certificate (given, or the system's), a host name the certificate does not
    carry, REQUIRED against a server without TLS, and key stores that cannot be opened: each run fails at its first
    connection with an error naming the host, the mode and the reason (never a password), and nothing is written."""
    x509 = user("X509")
    tls_server.execute("CREATE TABLE items (id INT PRIMARY KEY)", database=tls_db)
    client = dict(clientCertificateKeyStoreUrl=f"file:{tls_files.client_pem}",
                  clientCertificateKeyStorePassword="${LAKECDC_TLS_KEY_PW}")
    address = f"127.0.0.1:{tls_server.port}"

    message = failure(pipeline(tls_server, tls_db, x509, tmp_path, tls_lines(
        sslMode="VERIFY_CA", trustCertificateKeyStoreUrl=f"file:{tls_files.other_ca}", **client)))
    assert message.startswith(f"TLS to MySQL at {address} failed (sslMode VERIFY_CA): the server's certificate was "
                              "refused: self-signed certificate in certificate chain; check that "
                              "jdbc.properties.trustCertificateKeyStoreUrl holds the CA"), message

    message = failure(pipeline(tls_server, tls_db, x509, tmp_path, tls_lines(sslMode="VERIFY_CA", **client)))
    assert message.endswith("give the CA that signed it as jdbc.properties.trustCertificateKeyStoreUrl (the system's "
                            "CA certificates were used)"), message

    message = failure(pipeline(tls_server, tls_db, x509, tmp_path, tls_lines(
        sslMode="VERIFY_IDENTITY", trustCertificateKeyStoreUrl=f"file:{tls_files.ca}", **client), host="localhost"))
    assert message.startswith(f"TLS to MySQL at localhost:{tls_server.port} failed (sslMode VERIFY_IDENTITY): the "
                              "server's certificate was refused: Hostname mismatch, certificate is not valid for "
                              "'localhost'; connect with a host name the certificate is issued for"), message

    plain = parse_pipeline(PIPELINE.format(host="127.0.0.1", port=mariadb.port, user="root", db=fresh_db,
                                           tls=tls_lines(sslMode="REQUIRED"), warehouse=tmp_path / "wh"),
                           env={"LAKECDC_TLS_PW": ""})
    message = failure(plain)
    assert message.startswith(f"TLS to MySQL at 127.0.0.1:{mariadb.port} failed (sslMode REQUIRED): the server does "
                              "not offer TLS; turn TLS on at the server"), message

    wrong_password = pipeline(tls_server, tls_db, x509, tmp_path, tls_lines(
        sslMode="VERIFY_CA", trustCertificateKeyStoreUrl=f"file:{tls_files.trust_p12}",
        trustCertificateKeyStorePassword="${LAKECDC_TLS_PW}", **client))
    message = failure(wrong_password)
    assert message == (f"MySQL source: jdbc.properties.trustCertificateKeyStoreUrl: cannot open {tls_files.trust_p12} "
                       "as a PKCS12 key store: the password (jdbc.properties.trustCertificateKeyStorePassword) is "
                       "wrong, or the file is not PKCS12")

    jks = tmp_path / "store.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))  # a Java key store's magic number
    message = failure(pipeline(tls_server, tls_db, x509, tmp_path, tls_lines(
        sslMode="VERIFY_CA", trustCertificateKeyStoreUrl=f"file:{jks}")))
    assert f"{jks} is a JKS key store" in message and "keytool -importkeystore" in message, message
    assert written(tmp_path) == []


def test_tls_options_are_read_as_connector_j_reads_them(tmp_path):
    """The YAML side: the legacy properties translated as Connector/J translates them (sslMode, when given, wins),
    the refusals that name the option, and key store passwords only from the environment."""
    def source(tls: str):
        return parse_pipeline(PIPELINE.format(host="h", port=1, user="u", db="d", tls=tls, warehouse=tmp_path),
                              env={"LAKECDC_TLS_PW": "", "KEYS": "k"}).source

    def error(tls: str) -> str:
        with pytest.raises(PipelineConfigError) as info:
            source(tls)
        return str(info.value)

    modes = {"": "PREFERRED", "useSSL: false": "DISABLED", "useSSL: true": "PREFERRED",
             "requireSSL: true": "REQUIRED", "useSSL: true\n  jdbc.properties.requireSSL: true": "REQUIRED",
             "verifyServerCertificate: true": "VERIFY_CA", "useSSL: false\n  jdbc.properties.sslMode: verify_ca":
             "VERIFY_CA", "sslMode: Verify_Identity": "VERIFY_IDENTITY"}
    for lines, mode in modes.items():
        assert source(f"  jdbc.properties.{lines}\n" if lines else "").tls.mode == mode, lines

    assert error(tls_lines(useUnicode="true")).endswith(
        "source.jdbc.properties.useUnicode: not supported: lakecdc takes only Connector/J's TLS and authentication "
        "properties under jdbc.properties. (sslMode, useSSL, requireSSL, verifyServerCertificate, "
        "trustCertificateKeyStoreUrl, trustCertificateKeyStoreType, trustCertificateKeyStorePassword, "
        "fallbackToSystemTrustStore, clientCertificateKeyStoreUrl, clientCertificateKeyStoreType, "
        "clientCertificateKeyStorePassword, allowPublicKeyRetrieval, serverRSAPublicKeyFile)")
    assert error(tls_lines(sslmode="REQUIRED")).endswith(
        "source.jdbc.properties.sslmode: unknown option (did you mean 'jdbc.properties.sslMode'?)")
    assert error(tls_lines(sslMode="STRICT")).endswith(
        "unknown sslMode 'STRICT'; use one of DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY")
    assert "convert it to PKCS12 with `keytool -importkeystore" in error(tls_lines(
        sslMode="VERIFY_CA", trustCertificateKeyStoreUrl="file:/x.jks", trustCertificateKeyStoreType="JKS"))
    assert error(tls_lines(sslMode="VERIFY_CA", trustCertificateKeyStoreUrl="https://example.com/ca.pem")).endswith(
        "expected a file: URL such as file:/etc/mysql/ca.pem (or an absolute path), got "
        "'https://example.com/ca.pem': lakecdc reads key stores from local files only")
    assert error(tls_lines(sslMode="REQUIRED", trustCertificateKeyStoreUrl="file:/ca.pem")).endswith(
        "source.jdbc.properties.trustCertificateKeyStoreUrl: the CA is only checked with sslMode VERIFY_CA or "
        "VERIFY_IDENTITY (the mode is REQUIRED): set jdbc.properties.sslMode to one of them, or remove the trust store")
    assert error(tls_lines(sslMode="VERIFY_CA", fallbackToSystemTrustStore="false")).endswith(
        "sslMode VERIFY_CA needs the CA to trust: give jdbc.properties.trustCertificateKeyStoreUrl, or set "
        "jdbc.properties.fallbackToSystemTrustStore: true to trust the system's CA certificates")
    assert error(tls_lines(clientCertificateKeyStorePassword="${KEYS}")).endswith(
        "source.jdbc.properties.clientCertificateKeyStorePassword: has no effect without "
        "jdbc.properties.clientCertificateKeyStoreUrl")
    literal = error(tls_lines(clientCertificateKeyStoreUrl="file:/c.p12", clientCertificateKeyStorePassword=SECRET))
    assert "source.jdbc.properties.clientCertificateKeyStorePassword: a key store password written in the pipeline " \
           "file is refused" in literal and SECRET not in literal
    tls = source(tls_lines(clientCertificateKeyStoreUrl="file:/c.p12", clientCertificateKeyStorePassword="${KEYS}")).tls
    assert tls.client_store_password == "k" and "k'" not in repr(tls) and "password" not in repr(tls)


def test_only_the_connection_module_opens_connections():
    """Every connection is lakecdc.source.connection's Connection (through ``connect`` or the binlog stream's
    ``connection_settings``), which applies the TLS settings: no other module of lakecdc opens one itself."""
    import re
    from pathlib import Path

    import lakecdc

    opener = re.compile(r"pymysql\.(connect|Connect|connections\.Connection)\(|BinLogStreamReader\(|"
                        r"\bConnection\(|BinlogDumpConnection\(")
    package = Path(lakecdc.__file__).parent
    found = [f"{path.relative_to(package)}:{number}" for path in sorted(package.rglob("*.py"))
             if path.name != "connection.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if opener.search(line)]
    assert found == []


def test_caching_sha2_password_parts_that_run_without_a_server():
    """MySQL 8's caching_sha2_password cannot run here (MariaDB has no such plugin), so only its two local parts are
    tested, not an exchange with a server: (1) on the server's "send the full password" answer, a connection without
    TLS, without the server's key and without allowPublicKeyRetrieval refuses before sending anything, with the error
    that says what to do; (2) PyMySQL's RSA encryption of the password works with the declared cryptography: the
    server's private key recovers the password (XOR the salt, as the server undoes it)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    from pymysql import _auth
    from pymysql.err import OperationalError
    from pymysql.protocol import MysqlPacket

    from lakecdc.source.connection import Connection, connection_kwargs
    from lakecdc.source.options import MySqlSourceOptions, TlsConfig
    from lakecdc.source.tls import CachingSha2Password

    options = MySqlSourceOptions(hostname="db.example", port=3306, username="cdc", password=SECRET,
                                 tls=TlsConfig(ssl_mode="DISABLED"))
    conn = Connection(**connection_kwargs(options), defer_connect=True)  # no network: never connected
    with pytest.raises(OperationalError) as info:
        CachingSha2Password(conn).authenticate(MysqlPacket(b"\x01\x04", "utf8"))  # the server's full-auth answer
    code, message = info.value.args
    assert code == 2061 and message.startswith(
        "MySQL at db.example:3306 asks for the full password of a caching_sha2_password user") and \
        "jdbc.properties.allowPublicKeyRetrieval: true" in message and SECRET not in message

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    salt = b"0123456789abcdefghij"
    sent = _auth.sha2_rsa_encrypt(SECRET.encode(), salt, public)
    clear = key.decrypt(sent, padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None))
    assert bytes(c ^ salt[i % len(salt)] for i, c in enumerate(clear)) == SECRET.encode() + b"\0"

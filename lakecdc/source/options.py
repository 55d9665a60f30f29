"""The options of the MySQL source (the ``source:`` block of a Flink CDC pipeline YAML), declared once.

Every ``source:`` option is declared here, as Flink CDC's ``MySqlDataSourceOptions`` declares them: the options lakecdc
uses on the :class:`MySqlSourceOptions` field they fill (with :func:`lakecdc.options.option`), the ones it only
accepts or refuses in :data:`ACCEPTED` and :data:`REFUSED`. :func:`from_yaml` reads a ``source:`` block into
:class:`MySqlSourceOptions` and checks what depends on several options; docs/pipeline-yaml.md renders its table from
:data:`OPTIONS`.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from lakecdc.errors import SourceError
from lakecdc.options import (BOOL, DURATION, FLOAT, INT, STRING, Option, Prefix, Where, check_keys, check_zone,
                             declarations, nested, option, read)
from lakecdc.selectors import TableSelector
from lakecdc.source.gtid import gtid_flavor

STARTUP_MODES = ("initial", "snapshot", "latest-offset", "earliest-offset", "specific-offset", "timestamp")
# Connector/J's sslMode values, weakest first
SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
VERIFYING_MODES = ("VERIFY_CA", "VERIFY_IDENTITY")
KEY_STORE_TYPES = ("PEM", "PKCS12")
JDBC = "jdbc.properties."  # the prefix of the Connector/J properties a Flink CDC pipeline passes to the driver
METADATA_KEYS = ("op_ts", "table_name", "database_name")  # what ``metadata.list`` may name
MAX_PORT = 65535
MAX_SERVER_ID = 2**32 - 1


def _startup_mode(value: str, where: Where) -> str:
    mode = value.lower()
    if mode not in STARTUP_MODES:
        raise where.error(f"unknown startup mode {mode!r}; use one of {', '.join(STARTUP_MODES)}")
    return mode


def _gtid_set(value: str, where: Where) -> str:
    try:
        gtid_flavor(value)
    except SourceError as exc:
        raise where.error(str(exc)) from None
    return value


def _selector(value: str, where: Where) -> str:
    TableSelector(value, file=where.file, path=where.path)  # syntax errors name the option, before any connection
    return value


def _metadata_list(value: str, where: Where) -> frozenset[str]:
    names = frozenset(m.strip() for m in value.split(",") if m.strip())
    for name in sorted(names):
        if name not in METADATA_KEYS:
            raise where.error(f"[{name}] cannot be found in mysql metadata (available: {', '.join(METADATA_KEYS)})")
    return names


def _server_ids(value: str, where: Where) -> tuple[int, int | None]:
    try:
        first, last = parse_server_id_range(value)
    except SourceError as exc:
        raise where.error(str(exc)) from None
    return first, (last if "-" in str(value) else None)


def _chunk_key_columns(value: str, where: Where) -> tuple[tuple[str, str], ...]:
    try:
        return parse_chunk_key_columns(value)
    except SourceError as exc:
        raise where.error(str(exc)) from None


@dataclass(frozen=True)
class StartupConfig:
    """``scan.startup.*``: where a table without checkpoint starts."""

    mode: str = option("scan.startup.mode", STRING, "initial", convert=_startup_mode,
                       doc=f"{', '.join(f'`{m}`' for m in STARTUP_MODES)} (see "
                           "[operations.md](operations.md#startup-modes))")
    file: str | None = option("scan.startup.specific-offset.file", STRING, None,
                              doc="`specific-offset` only, with `scan.startup.specific-offset.pos`")
    pos: int | None = option("scan.startup.specific-offset.pos", INT, None, minimum=4,
                             doc="`specific-offset` only, with `scan.startup.specific-offset.file`")
    gtid_set: str | None = option("scan.startup.specific-offset.gtid-set", STRING, None, convert=_gtid_set,
                                  doc="`specific-offset` only, instead of the file and position (MariaDB "
                                      "`0-1-42,1-2-7` or MySQL `uuid:1-42`, matching the server)")
    skip_events: int = option("scan.startup.specific-offset.skip-events", INT, 0, minimum=0,
                              doc="`specific-offset` only: row events (of the captured tables) after the position "
                                  "to drop")
    skip_rows: int = option("scan.startup.specific-offset.skip-rows", INT, 0, minimum=0,
                            doc="`specific-offset` only: rows of the next row event to drop")
    timestamp_millis: int | None = option("scan.startup.timestamp-millis", INT, None, minimum=0,
                                          doc="required by `timestamp` (epoch milliseconds)")


def _ssl_mode(value: str, where: Where) -> str:
    mode = value.strip().upper()
    if mode not in SSL_MODES:
        raise where.error(f"unknown sslMode {value!r}; use one of {', '.join(SSL_MODES)}")
    return mode


def _store_type(value: str, where: Where) -> str:
    kind = value.strip().upper()
    if kind == "JKS":
        raise where.error(jks_refusal())
    if kind not in KEY_STORE_TYPES:
        raise where.error(f"unknown key store type {value!r}; use PEM or PKCS12")
    return kind


def jks_refusal(path: str = "store.jks") -> str:
    """Why a JKS key store is refused, and the command that converts it."""
    return (f"JKS key stores are Java's own format, which lakecdc cannot read: convert it to PKCS12 with `keytool "
            f"-importkeystore -srckeystore {path} -destkeystore store.p12 -deststoretype PKCS12` and give the .p12 "
            "file with the key store type PKCS12 (or give a PEM file)")


def _file_url(value: str, where: Where) -> str:
    """A key store location as Connector/J takes it (a ``file:`` URL) or an absolute path: the local path."""
    text = value.strip()
    parts = urlsplit(text)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost"):
        path = unquote(parts.path)
    elif not parts.scheme and text.startswith("/"):
        path = text
    else:
        raise where.error(f"expected a file: URL such as file:/etc/mysql/ca.pem (or an absolute path), got {text!r}: "
                          "lakecdc reads key stores from local files only")
    if not Path(path).is_absolute():
        raise where.error(f"the path of {text!r} is relative; write file:/absolute/path")
    return path


def _file(name: str, doc: str) -> Any:
    """The option of a local file, written as a ``file:`` URL (Connector/J's ``name``)."""
    return option(JDBC + name, STRING, None, convert=_file_url, doc=doc)


def _key_store_type(name: str, doc: str) -> Any:
    """The option of a key store's type (``name``: Connector/J's property)."""
    return option(JDBC + name, STRING, None, convert=_store_type, default_doc="from the file", doc=doc)


def _key_store_password(name: str, doc: str) -> Any:
    """The option of a key store's password: a secret, left out of ``repr`` (lakecdc.config takes it only from the
    environment)."""
    return option(JDBC + name, STRING, "", allow_empty=True, repr=False, default_doc="empty",
                  doc=f"{doc}; only `${{ENV}}`, never logged")


@dataclass(frozen=True)
class TlsConfig:
    """``jdbc.properties.*``: TLS and authentication of every connection to MySQL (snapshot, binlog, checks, status,
    sensor), under the names of MySQL Connector/J, the driver Flink CDC passes them to. lakecdc.source.tls turns
    them into the driver's TLS context.

    The key store passwords are excluded from ``repr``, come only from ``${ENV}`` (lakecdc.config) or a Dagster
    ``EnvVar`` and are never put into log lines or error messages."""

    ssl_mode: str | None = option(
        JDBC + "sslMode", STRING, None, convert=_ssl_mode,
        default_doc="PREFERRED, or what the legacy properties below say",
        doc="`DISABLED`, `PREFERRED` (TLS when the server offers it, no certificate check), `REQUIRED` (TLS or "
            "fail, no certificate check), `VERIFY_CA` (and the server's certificate must be signed by the trusted "
            "CA), `VERIFY_IDENTITY` (and name the host connected to); every connection: snapshot, binlog, checks, "
            "status, sensor (see [operations.md](operations.md#tls))")
    # Connector/J's legacy properties, translated into an sslMode when sslMode is not given (as Connector/J does)
    use_ssl: bool | None = option(JDBC + "useSSL", BOOL, None,
                                  doc="legacy, used only without `sslMode` (as in Connector/J): `false` means "
                                      "`DISABLED`")
    require_ssl: bool | None = option(JDBC + "requireSSL", BOOL, None,
                                      doc="legacy, without `sslMode`: `true` means `REQUIRED`")
    verify_server_certificate: bool | None = option(JDBC + "verifyServerCertificate", BOOL, None,
                                                    doc="legacy, without `sslMode`: `true` means `VERIFY_CA`")
    trust_store: str | None = _file(
        "trustCertificateKeyStoreUrl",
        "the CA certificates `VERIFY_CA` and `VERIFY_IDENTITY` trust: `file:/path` (only with those modes)")
    trust_store_type: str | None = _key_store_type(
        "trustCertificateKeyStoreType", "`PEM` (a CA bundle, as managed MySQL services publish) or `PKCS12`; `JKS` "
                                        "is refused with the command that converts it")
    trust_store_password: str = _key_store_password("trustCertificateKeyStorePassword",
                                                    "a `PKCS12` trust store's password")
    fallback_to_system_trust_store: bool = option(
        JDBC + "fallbackToSystemTrustStore", BOOL, True,
        doc="`VERIFY_CA` / `VERIFY_IDENTITY` without `trustCertificateKeyStoreUrl` trust the system's CA "
            "certificates; `false`: the URL is required")
    client_store: str | None = _file(
        "clientCertificateKeyStoreUrl",
        "the client certificate and its key, presented when the connection uses TLS (users created `REQUIRE X509`): "
        "`file:/path`")
    client_store_type: str | None = _key_store_type("clientCertificateKeyStoreType",
                                                    "`PEM` (certificate and private key in one file) or `PKCS12`")
    client_store_password: str = _key_store_password("clientCertificateKeyStorePassword",
                                                     "the `PKCS12` store's password, or the PEM key's")
    allow_public_key_retrieval: bool = option(
        JDBC + "allowPublicKeyRetrieval", BOOL, False,
        doc="`caching_sha2_password` on a connection without TLS: fetch the server's RSA key to send the password "
            "(see [operations.md](operations.md#mysql-8s-authentication-caching_sha2_password))")
    server_rsa_public_key_file: str | None = _file(
        "serverRSAPublicKeyFile", "the server's RSA public key (PEM) for the same, instead of fetching it")

    @property
    def mode(self) -> str:
        """The effective sslMode: ``sslMode``, else Connector/J's translation of the legacy properties (``useSSL``
        true by default, so ``requireSSL`` or ``verifyServerCertificate`` alone raise the mode), else PREFERRED."""
        if self.ssl_mode is not None:
            return self.ssl_mode
        if self.use_ssl is False:
            return "DISABLED"
        if self.verify_server_certificate:
            return "VERIFY_CA"
        if self.require_ssl:
            return "REQUIRED"
        return "PREFERRED"

    @property
    def verifies(self) -> bool:
        return self.mode in VERIFYING_MODES

    def problems(self) -> list[tuple[str, str]]:
        """(option key, what is wrong) for each combination that would be ignored or cannot work."""
        found = []
        stores = (("trustCertificateKeyStore", self.trust_store, self.trust_store_type, self.trust_store_password),
                  ("clientCertificateKeyStore", self.client_store, self.client_store_type, self.client_store_password))
        for name, url, kind, password in stores:
            if url is None:
                found += [(f"{JDBC}{name}{suffix}", f"has no effect without {JDBC}{name}Url")
                          for suffix, value in (("Type", kind), ("Password", password)) if value]
        if self.trust_store is not None and not self.verifies:
            found.append((JDBC + "trustCertificateKeyStoreUrl",
                          f"the CA is only checked with sslMode VERIFY_CA or VERIFY_IDENTITY (the mode is "
                          f"{self.mode}): set {JDBC}sslMode to one of them, or remove the trust store"))
        if self.verifies and self.trust_store is None and not self.fallback_to_system_trust_store:
            found.append((JDBC + "trustCertificateKeyStoreUrl",
                          f"sslMode {self.mode} needs the CA to trust: give {JDBC}trustCertificateKeyStoreUrl, or "
                          f"set {JDBC}fallbackToSystemTrustStore: true to trust the system's CA certificates"))
        return found


TLS_SECRETS = (JDBC + "trustCertificateKeyStorePassword", JDBC + "clientCertificateKeyStorePassword")


@dataclass
class MySqlSourceOptions:
    """How to reach the MySQL/MariaDB server, which tables to read and how.

    ``password`` is excluded from ``repr`` and is never put into log lines or error messages.
    """

    hostname: str = option("hostname", doc="the MySQL/MariaDB server")
    # required in the YAML; the defaults serve code that builds options directly (tests, benchmarks)
    username: str = option("username", STRING, "root", required=True,
                           doc="the MySQL user the pipeline reads as")
    password: str = option("password", STRING, "", allow_empty=True, repr=False, default_doc="empty",
                           doc="only `${ENV}` (or `${ENV:-}`): a password written in the file, also as a "
                               "`${ENV:-default}`, is refused; never logged")
    port: int = option("port", INT, 3306, minimum=1,
                       check=lambda p: f"a TCP port is 1..{MAX_PORT}, got {p}" if p > MAX_PORT else None,
                       doc="1..65535")
    tables: str = option("tables", STRING, "", required=True, convert=_selector,
                         doc="Flink CDC selectors: `db.table`, comma-separated, each part a case-insensitive regex, "
                             "`\\.` = any character; a one- or three-part pattern (which matches no MySQL table "
                             "in Flink CDC) is an error")
    tables_exclude: str | None = option("tables.exclude", STRING, None, convert=_selector,
                                        doc="same syntax, removed from `tables`")
    server_id: int = option("server-id", STRING, 5400, convert=_server_ids, into=("server_id", "server_id_last"),
                            doc="`5400` or a range `5400-5404`: each binlog connection uses the first id no "
                                "registered replica uses, the next one after a lost connection (see "
                                "[operations.md](operations.md#connections-server-ids-heartbeats))")
    server_id_last: int | None = None  # the last id of a server-id range (None: just ``server_id``)
    # Flink CDC's session zone for TIMESTAMP values. Accepted for compatibility: every session here uses
    # time_zone '+00:00', so TIMESTAMP columns are read as exact UTC instants whatever the server's zone is.
    server_time_zone: str = option("server-time-zone", STRING, "UTC", check=check_zone,
                                   doc="validated; TIMESTAMP values are read as UTC instants whatever the zones "
                                       "(see operations.md)")
    metadata_list: frozenset[str] = option("metadata.list", STRING, frozenset(), convert=_metadata_list,
                                           doc="`op_ts` makes the `op_ts` column available to transforms (0 for "
                                               "snapshot rows, commit time in epoch ms for binlog rows)")
    treat_tinyint1_as_boolean: bool = option("treat-tinyint1-as-boolean.enabled", BOOL, True,
                                             doc="TINYINT(1) columns become BOOLEAN (see *Column types*)")
    connect_timeout: float = option("connect.timeout", DURATION, 30.0, default_doc="`30s`",
                                    check=lambda t: "must be at least 250ms" if t < 0.25 else None,
                                    doc="every connection (at least 250ms)")
    # a lost connection is retried this many times (binlog reads, snapshot chunks)
    connect_max_retries: int = option("connect.max-retries", INT, 3, minimum=1,
                                      doc="retries of a lost connection (binlog reads, snapshot commit groups), "
                                          "exponential backoff from 1 s")
    # seconds; the server sends a heartbeat on an idle binlog connection
    heartbeat_interval: float = option("heartbeat.interval", DURATION, 30.0, default_doc="`30s`",
                                       check=lambda s: "must be greater than 0" if s <= 0 else None,
                                       doc="heartbeat period of the binlog connection")
    startup: StartupConfig = nested(StartupConfig)
    chunk_size: int = option("scan.incremental.snapshot.chunk.size", INT, 8096, minimum=2,
                             doc="rows per snapshot chunk (> 1)")
    # (selector, column) pairs of scan.incremental.snapshot.chunk.key-column, first match wins
    chunk_key_columns: tuple[tuple[str, str], ...] = option(
        "scan.incremental.snapshot.chunk.key-column", STRING, (), convert=_chunk_key_columns,
        default_doc="first primary-key column, else the first column of the first unique index whose columns are "
                    "all NOT NULL",
        doc="`db.table_regex:column;db2.t\\.*:col2`; lets a table with neither be chunked (any non-unique column "
            "works); see [operations.md](operations.md#large-tables-chunked-resumable-snapshots)")
    # Flink CDC's incremental snapshot (the default): lock-free, chunk by chunk, each chunk between two binlog
    # positions (lakecdc.runtime.commit_groups); false: one consistent transaction per commit group, which on MySQL
    # needs a brief global read lock (RELOAD)
    incremental_snapshot: bool = option(
        "scan.incremental.snapshot.enabled", BOOL, True,
        doc="`true`: lock-free snapshot chunk by chunk (Flink CDC's incremental snapshot; a table with neither "
            "primary key nor unique NOT NULL index needs `scan.incremental.snapshot.chunk.key-column`); `false`: a "
            "consistent transaction per commit group, which on MySQL takes `FLUSH TABLES WITH READ LOCK` (needs "
            "RELOAD); see [operations.md](operations.md#grants)")
    newly_added_tables: bool = option("scan.newly-added-table.enabled", BOOL, False,
                                      doc="tables created after the pipeline started are snapshotted and captured "
                                          "(otherwise ignored)")
    binlog_newly_added_tables: bool = option("scan.binlog.newly-added-table.enabled", BOOL, False,
                                             doc="tables created after the pipeline started are captured from the "
                                                 "binlog only; not together with the previous option")
    schema_change_enabled: bool = option("schema-change.enabled", BOOL, True,
                                         doc="`false`: no schema change reaches Paimon (Flink CDC's source then "
                                             "emits none): the pipeline runs with `schema.change.behavior: ignore` "
                                             "whatever that option says")
    # Flink CDC's default false: every schema (snapshot, DDL, history) is read without comments and ALTER TABLE ...
    # COMMENT gives no event, so no comment reaches Paimon
    include_comments: bool = option("include-comments.enabled", BOOL, False,
                                    doc="as in Flink CDC: table and column comments reach Paimon (and the Dagster "
                                        "MySQL assets) only when `true`; with `false` tables are created without "
                                        "comments, `ALTER TABLE ... COMMENT` gives no event and column comments in "
                                        "DDL are ignored (tables created earlier keep the comments they have)")
    # Flink CDC's option of the same name: gh-ost / pt-online-schema-change migrations are followed through their
    # shadow tables (lakecdc.source.ddl); without it a RENAME that swaps another table in is a statement lakecdc
    # cannot interpret
    parse_online_schema_changes: bool = option(
        "scan.parse.online.schema.changes.enabled", BOOL, False,
        doc="gh-ost and pt-online-schema-change migrations: the ALTER run on the tool's shadow table (`_t_gho`, "
            "`_t_new`) becomes the schema change of `t` at the RENAME that swaps the shadow table in; the shadow "
            "tables' rows are not captured (see [schema-changes.md](schema-changes.md#online-schema-change-tools))")
    # jdbc.properties.*: TLS of every connection (Connector/J's names)
    tls: TlsConfig = nested(TlsConfig)
    # not options of the YAML: tuning for code that builds the options directly
    snapshot_batch_rows: int = 65536  # rows per Arrow batch from the snapshot
    retry_backoff: float = 1.0  # seconds before the first retry; doubled for each further one (capped at 30 s)

    def __post_init__(self) -> None:
        if not self.hostname:
            raise SourceError("MySQL source: 'hostname' is required")
        if not isinstance(self.port, int) or not 0 < self.port <= MAX_PORT:
            raise SourceError(f"MySQL source: 'port' must be 1..{MAX_PORT}, got {self.port!r}")
        if not isinstance(self.server_id, int) or not 0 < self.server_id <= MAX_SERVER_ID:
            raise SourceError(f"MySQL source: 'server-id' must be 1..{MAX_SERVER_ID}, got {self.server_id!r}")
        if self.server_id_last is not None and not self.server_id <= self.server_id_last <= MAX_SERVER_ID:
            raise SourceError(f"MySQL source: 'server-id' range {self.server_id}-{self.server_id_last} is invalid")
        if self.snapshot_batch_rows < 1:
            raise SourceError("MySQL source: snapshot_batch_rows must be >= 1")
        if self.connect_timeout <= 0:
            raise SourceError("MySQL source: 'connect.timeout' must be > 0")
        if self.heartbeat_interval <= 0:
            raise SourceError("MySQL source: 'heartbeat.interval' must be > 0")
        if self.connect_max_retries < 0:
            raise SourceError("MySQL source: 'connect.max-retries' must be >= 0")
        if self.chunk_size < 2:
            raise SourceError("MySQL source: 'scan.incremental.snapshot.chunk.size' must be > 1")
        for key, problem in self.tls.problems()[:1]:
            raise SourceError(f"MySQL source: '{key}' {problem}")

    @property
    def startup_mode(self) -> str:
        return self.startup.mode

    @property
    def address(self) -> str:
        return f"{self.hostname}:{self.port}"

    @property
    def server_ids(self) -> list[int]:
        """Every binlog client id this source may use (one for a single id)."""
        last = self.server_id if self.server_id_last is None else self.server_id_last
        return list(range(self.server_id, min(last, self.server_id + 1023) + 1))

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return min(30.0, self.retry_backoff * 2 ** (attempt - 1))


_SERVER_ID = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_server_id(value: int | str) -> int:
    """The binlog client id from a Flink CDC ``server-id`` value: ``5400`` or a range ``'5400-5404'`` (first id)."""
    return parse_server_id_range(value)[0]


def parse_chunk_key_columns(value: str) -> tuple[tuple[str, str], ...]:
    """``db.tbl_regex:col;db2.t\\.*:col2`` (Flink CDC's scan.incremental.snapshot.chunk.key-column) as
    (selector, column) pairs."""
    pairs = []
    for item in (p.strip() for p in str(value).split(";")):
        if not item:
            continue
        selector, sep, column = item.rpartition(":")
        if not sep or not selector.strip() or not column.strip():
            raise SourceError(f"MySQL source: invalid 'scan.incremental.snapshot.chunk.key-column' item {item!r}: "
                              "expected 'database.table:column' (several separated by ';')")
        pairs.append((selector.strip(), column.strip()))
    return tuple(pairs)


def parse_server_id_range(value: int | str) -> tuple[int, int]:
    """``5400`` → (5400, 5400); ``'5400-5404'`` → (5400, 5404)."""
    text = str(value)
    match = _SERVER_ID.match(text) if not isinstance(value, bool) else None
    if not match:
        raise SourceError(f"expected an id like 5400 or a range like 5400-5404, got {text!r}")
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if last < first:
        raise SourceError(f"the range {text!r} ends before it starts")
    if not 1 <= first <= MAX_SERVER_ID or last > MAX_SERVER_ID:
        raise SourceError(f"server ids are 1..{MAX_SERVER_ID}, got {text!r}")
    return first, last


# Accepted because they only tune Flink's parallel snapshot machinery (or its JSON rendering), which a
# single-process micro-batch does not have; they change no result. Validated like Flink CDC types them.
_TUNING = "accepted and validated; tunes Flink's parallel reader and changes no result here"
ACCEPTED = (
    Option("scan.snapshot.fetch.size", INT, 1024, minimum=2, doc=_TUNING),
    Option("chunk-meta.group.size", INT, 1000, minimum=1, doc=_TUNING),
    Option("chunk-key.even-distribution.factor.upper-bound", FLOAT, 1000.0, doc=_TUNING),
    Option("chunk-key.even-distribution.factor.lower-bound", FLOAT, 0.05, doc=_TUNING),
    Option("scan.incremental.close-idle-reader.enabled", BOOL, False, doc=_TUNING),
    Option("scan.incremental.snapshot.unbounded-chunk-first.enabled", BOOL, False, doc=_TUNING),
    Option("connection.pool.size", INT, 20, minimum=1, doc=_TUNING),
    Option("scan.incremental.snapshot.backfill.skip", BOOL, False,
           doc="accepted and validated; the chunked snapshot is always exact"),
    Option("use.legacy.json.format", BOOL, True, doc="accepted and validated; changes nothing here"),
)
REFUSED = (
    Prefix(JDBC, refused="any other: lakecdc takes only the Connector/J properties of TLS and authentication above"),
    Prefix("debezium.", refused="pass-through driver options are not supported yet"),
)
TYPE = Option("type", STRING, required=True, doc="must be `mysql`",
              check=lambda kind: None if kind.lower() == "mysql" else
              f"only the 'mysql' source is supported, got {kind!r}")
# every option of the ``source:`` block
NAME = Option("name", STRING, None, doc="free text")
OPTIONS: tuple[Option | Prefix, ...] = (TYPE, NAME, *declarations(MySqlSourceOptions), *ACCEPTED, *REFUSED)


def from_yaml(raw: dict, file: str | None, section: str = "source") -> MySqlSourceOptions:
    """The ``source:`` block of a pipeline YAML as options; every error names the file and the key path."""
    TYPE.read(raw, section, file)
    check_keys(raw, section, file, OPTIONS)
    for spec in (NAME, *ACCEPTED, *REFUSED[1:]):
        spec.read(raw, section, file)
    _check_jdbc_properties(raw, section, file)
    values = read(MySqlSourceOptions, raw, section, file)
    _check_startup(raw, values["startup"], section, file)
    for key, problem in values["tls"].problems()[:1]:
        raise Where(file, f"{section}.{key}").error(problem)
    if values["newly_added_tables"] and values["binlog_newly_added_tables"]:
        raise Where(file, f"{section}.scan.binlog.newly-added-table.enabled").error(
            "cannot be enabled together with scan.newly-added-table.enabled: choose snapshot + binlog "
            "(scan.newly-added-table.enabled) or binlog only for tables created later")
    return MySqlSourceOptions(**values)


def _check_jdbc_properties(raw: dict, section: str, file: str | None) -> None:
    """The ``jdbc.properties.*`` keys lakecdc does not declare are refused by name: a near miss of a declared one as
    an unknown option naming it (Connector/J's names are case-sensitive), any other as not supported."""
    declared = [spec.key for spec in declarations(TlsConfig)]
    for key in raw:
        if not isinstance(key, str) or not key.startswith(JDBC) or key in declared:
            continue
        where = Where(file, f"{section}.{key}")
        same = [d for d in declared if d.lower() == key.lower()] or difflib.get_close_matches(key, declared, n=1,
                                                                                             cutoff=0.85)
        if same:
            raise where.error(f"unknown option (did you mean '{same[0]}'?)")
        raise where.error(f"not supported: lakecdc takes only Connector/J's TLS and authentication properties under "
                          f"{JDBC} ({', '.join(d[len(JDBC):] for d in declared)})")


def tls_with(tls: TlsConfig, overrides: dict[str, object], where: str) -> TlsConfig:
    """``tls`` with the ``jdbc.properties.*`` values of ``overrides`` (keys as in the YAML, None: keep) replacing its
    own, validated as the YAML's are (a Dagster MySqlResource's TLS fields); errors name ``where``."""
    raw: dict[str, object] = {}
    for name, spec in ((f.name, f.metadata["option"]) for f in dataclasses.fields(TlsConfig)):
        value = getattr(tls, name)
        if value is not None and value != spec.default:
            raw[spec.key] = value
    raw.update({key: value for key, value in overrides.items() if value is not None})
    result = TlsConfig(**read(TlsConfig, raw, where, None))
    for key, problem in result.problems()[:1]:
        raise Where(None, f"{where}.{key}").error(problem)
    return result


def _check_startup(raw: dict, startup: StartupConfig, section: str, file: str | None) -> None:
    """The options each ``scan.startup.mode`` needs, and only those (Flink CDC's rules)."""
    mode = startup.mode
    given = {spec.key for spec in declarations(StartupConfig) if raw.get(spec.key) is not None}
    ts, gtid = "scan.startup.timestamp-millis", "scan.startup.specific-offset.gtid-set"
    for key in sorted(given - {"scan.startup.mode"}):
        wanted = "timestamp" if key == ts else "specific-offset"
        if mode != wanted:
            raise Where(file, f"{section}.{key}").error(
                f"only used with scan.startup.mode: {wanted} (the mode is {mode!r}); remove it or change the mode")
    if mode == "timestamp" and startup.timestamp_millis is None:
        raise Where(file, f"{section}.{ts}").error("required by scan.startup.mode: timestamp (epoch milliseconds)")
    if mode != "specific-offset":
        return
    if startup.gtid_set is not None and (startup.file is not None or startup.pos is not None):
        raise Where(file, f"{section}.{gtid}").error("give either the GTID set or the binlog file and position, "
                                                     "not both")
    if startup.gtid_set is None and (startup.file is None or startup.pos is None):
        raise Where(file, f"{section}.scan.startup.mode").error(
            "specific-offset needs scan.startup.specific-offset.gtid-set, or scan.startup.specific-offset.file "
            "together with scan.startup.specific-offset.pos")

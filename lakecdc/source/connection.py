"""Connections to the MySQL/MariaDB server and the server checks a CDC source needs (binlog settings, privileges,
current binlog position)."""

from __future__ import annotations

import re
from typing import Any, Iterator

import pymysql
from pymysql.constants import CLIENT
from pymysql.protocol import MysqlPacket
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import NotImplementedEvent, RotateEvent
from pymysqlreplication.packet import BinLogPacketWrapper

from lakecdc.errors import SourceError
from lakecdc.model import BinlogOffset
from lakecdc.source.compressed_events import (COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID, TYPE_AT, WIRE_REWRITTEN,
                                              payload_packets, uncompressed_packet, undecoded_packet)
from lakecdc.source.event_types import READ, TRANSACTION_PAYLOAD_EVENT, is_ignorable
from lakecdc.source.options import MySqlSourceOptions, TlsConfig
from lakecdc.source.tls import AUTH_PLUGINS, driver_settings, tls_failure

# Every session reads TIMESTAMP values as UTC instants: the server converts from its internal UTC value, so the
# result does not depend on the server's or the client's zone (the binlog also carries UTC instants).
SESSION_TIME_ZONE = "+00:00"


def driver_reason(exc: BaseException) -> str:
    """The driver's error text (PyMySQL messages never contain the password)."""
    args: tuple = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[0], int):
        return f"({args[0]}) {args[1]}"
    return str(exc) or type(exc).__name__


def error_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


# Client/server error codes that mean the connection is gone (not that the request was wrong): can't connect
# (2002, 2003), server gone away (2006), lost during a query (2013, 2055), killed (1927), server shutdown (1053),
# MySQL 8 idle disconnect (4031).
_CONNECTION_LOST = {2002, 2003, 2006, 2013, 2055, 1927, 1053, 4031}


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` means the connection broke (worth a retry), not that the statement failed."""
    if isinstance(exc, pymysql.err.InterfaceError):
        return True
    return isinstance(exc, pymysql.MySQLError) and error_code(exc) in _CONNECTION_LOST


def connection_kwargs(options: MySqlSourceOptions) -> dict[str, Any]:
    """Keyword arguments for :class:`Connection` (also used for the binlog stream's connections): the server, the
    user and the TLS settings (``tls``: every connection lakecdc opens honours ``jdbc.properties.sslMode``)."""
    return dict(
        host=options.hostname,
        port=options.port,
        user=options.username,
        password=options.password,
        charset="utf8mb4",
        connect_timeout=options.connect_timeout,
        tls=options.tls,
    )


class Connection(pymysql.connections.Connection):
    """PyMySQL's connection with lakecdc's TLS settings (``tls``, lakecdc.source.tls): every connection lakecdc opens
    is one, so every one honours ``jdbc.properties.sslMode``, and a connection that fails at TLS raises SourceError
    naming the host, the mode and the reason.

    In PyMySQL's default "preferred" TLS mode (TLS when the server offers it, no certificate check: sslMode
    PREFERRED) every connection shares one TLS context. PyMySQL builds a new one per connection, loading the
    system's CA certificates each time (about 40 ms), although the context it builds for this mode checks no
    certificate; a run opens several connections. The other modes use the context lakecdc.source.tls builds once
    per configuration."""

    _preferred_tls_context = None

    def __init__(self, *args, tls: TlsConfig | None = None, **kwargs) -> None:
        self.lakecdc_tls = tls if tls is not None else TlsConfig()
        kwargs.update(driver_settings(self.lakecdc_tls))
        kwargs.setdefault("auth_plugin_map", AUTH_PLUGINS)
        connect_now = not kwargs.pop("defer_connect", False)
        super().__init__(*args, defer_connect=True, **kwargs)
        if self.lakecdc_tls.mode == "PREFERRED":
            # a client certificate's own context: still TLS only when the server offers it, the SSL capability
            # announced only then (as PyMySQL's own preferred mode does)
            self._ssl_required = False
            self.client_flag &= ~CLIENT.SSL
        if connect_now:
            self.connect()

    def _create_ssl_ctx(self, sslp):
        if sslp:
            return super()._create_ssl_ctx(sslp)
        if Connection._preferred_tls_context is None:  # a race only builds it twice
            Connection._preferred_tls_context = super()._create_ssl_ctx(sslp)
        return Connection._preferred_tls_context

    def connect(self, sock=None) -> None:
        try:
            super().connect(sock)
        except pymysql.MySQLError as exc:
            failure = tls_failure(exc, f"{self.host}:{self.port}", self.lakecdc_tls)
            if failure is None:
                raise
            raise failure from None


def connect(options: MySqlSourceOptions, *, database: str | None = None, streaming: bool = False,
            autocommit: bool = True) -> pymysql.connections.Connection:
    """A PyMySQL connection with the session time zone set to UTC. ``streaming`` uses an unbuffered cursor class.

    Connection failures raise SourceError naming host:port and the driver's reason (never the password)."""
    kwargs = connection_kwargs(options)
    kwargs.update(database=database, autocommit=autocommit, init_command=f"SET time_zone='{SESSION_TIME_ZONE}'")
    if streaming:
        kwargs["cursorclass"] = pymysql.cursors.SSCursor
    try:
        return Connection(**kwargs)
    except pymysql.MySQLError as exc:
        raise SourceError(
            f"cannot connect to MySQL at {options.address} as user '{options.username}': {driver_reason(exc)}"
            f"{_connect_hint(error_code(exc))}") from None
    except OSError as exc:
        raise SourceError(f"cannot connect to MySQL at {options.address}: {exc}") from None


def _connect_hint(code: int | None) -> str:
    """What to check for the usual connection failures (no digits: lakecdc.dagster.failures reads error codes from
    the message)."""
    if code == 1045:
        return ("; check source.username and the password (the environment variable source.password names, or the "
                "Dagster MySqlResource password). A user created REQUIRE SSL or REQUIRE X509 is refused the same way "
                "on a connection without TLS or without a client certificate: see source.jdbc.properties.sslMode "
                "and clientCertificateKeyStoreUrl")
    if code in (2002, 2003, 2005):
        return "; check source.hostname and source.port, and that the server is running and reachable from here"
    return ""


def query(conn, sql: str, args: Any = None, *, options: MySqlSourceOptions | None = None) -> list[tuple]:
    """Run one statement and fetch all rows; driver errors become SourceError."""
    try:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    except pymysql.MySQLError as exc:
        where = f" at {options.address}" if options else ""
        raise SourceError(f"MySQL{where}: {sql.split()[0].upper()} failed: {driver_reason(exc)}") from exc


def text(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else v


def server_flavor(conn) -> str:
    """'mariadb' or 'mysql'."""
    return "mariadb" if "mariadb" in conn.get_server_info().lower() else "mysql"


def server_version(conn) -> tuple[int, int, int]:
    """(major, minor, patch); MariaDB's handshake puts '5.5.5-' before its version for old replicas: skipped."""
    info = conn.get_server_info()
    if info.startswith("5.5.5-") and "mariadb" in info.lower():
        info = info[len("5.5.5-"):]
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", info)
    return tuple(int(x) for x in match.groups()) if match else (0, 0, 0)  # type: ignore[return-value]


def _master_status(conn, options: MySqlSourceOptions) -> tuple | None:
    try:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            try:
                cur.execute("SHOW MASTER STATUS")
            except pymysql.err.ProgrammingError as exc:  # MySQL >= 8.4 removed SHOW MASTER STATUS
                if error_code(exc) != 1064:
                    raise
                cur.execute("SHOW BINARY LOG STATUS")
            return cur.fetchone()
    except pymysql.MySQLError as exc:
        if error_code(exc) in (1227, 1045, 1142):
            raise SourceError(_privilege_message(conn, options, "REPLICATION CLIENT", exc)) from None
        raise SourceError(f"MySQL at {options.address}: SHOW MASTER STATUS failed: {driver_reason(exc)}") from exc


def _privilege_message(conn, options: MySqlSourceOptions, what: str, exc: BaseException | None = None) -> str:
    if what == "REPLICATION CLIENT" and server_flavor(conn) == "mariadb":
        what = "BINLOG MONITOR"
    reason = f" ({driver_reason(exc)})" if exc is not None else ""
    return (
        f"MySQL user '{options.username}' at {options.address} lacks the {what} privilege{reason}; a CDC source "
        f"needs SELECT, REPLICATION SLAVE and {what}: GRANT SELECT, REPLICATION SLAVE, {what} ON *.* "
        f"TO '{options.username}'@'<client host>'"
    )


def binlog_gtid_pos(conn, file: str, pos: int) -> str:
    """MariaDB: the GTID position at (file, pos), '' when unknown."""
    try:
        rows = query(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
    except SourceError:
        return ""
    return (text(rows[0][0]) or "") if rows else ""


def head_offset(conn, options: MySqlSourceOptions, *, gtid: bool = True) -> BinlogOffset:
    """The server's current binlog end (SHOW MASTER STATUS) with its GTID position (``gtid`` False: without it on
    MariaDB, where it costs a BINLOG_GTID_POS query that scans the binlog file from its start)."""
    row = _master_status(conn, options)
    if not row:
        raise SourceError(
            f"MySQL at {options.address}: binary logging is disabled (log_bin=OFF); start the server with "
            "--log-bin (e.g. log-bin=mysql-bin, binlog_format=ROW in my.cnf) and restart it"
        )
    file, pos = text(row[0]), int(row[1])
    if server_flavor(conn) == "mariadb":
        position = binlog_gtid_pos(conn, file, pos) if gtid else ""
    else:
        position = (text(row[4]) or "").replace("\n", "") if len(row) > 4 else ""
    return BinlogOffset(file, pos, position)


def _global_variables(conn, names: list[str]) -> dict[str, str]:
    placeholders = ", ".join(["%s"] * len(names))
    rows = query(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})", names)
    return {text(k).lower(): str(text(v)) for k, v in rows}


_GRANT_ON_ALL = re.compile(r"^GRANT\s+(.*?)\s+ON\s+\*\.\*\s+TO\s", re.IGNORECASE | re.DOTALL)


def granted_globally(conn) -> set[str] | None:
    """Global privileges from SHOW GRANTS (upper case), or None when they cannot be read."""
    try:
        rows = query(conn, "SHOW GRANTS")
    except SourceError:
        return None
    privileges: set[str] = set()
    for (line,) in rows:
        match = _GRANT_ON_ALL.match(text(line))
        if match:
            privileges.update(p.strip().upper() for p in match.group(1).split(","))
    return privileges


def _probe_binlog_dump(options: MySqlSourceOptions, head: BinlogOffset) -> BaseException | None:
    """Try a non-blocking binlog dump from the head: the authoritative REPLICATION SLAVE check."""
    stream = open_binlog_stream(options, log_file=head.file, log_pos=head.pos, resume_stream=True, blocking=False,
                                is_mariadb=False, only_events=[RotateEvent])
    try:
        for _ in stream:
            pass
    except pymysql.MySQLError as exc:
        return exc
    finally:
        stream.close()
    return None


def check_server(conn, options: MySqlSourceOptions) -> None:
    """Raise SourceError naming the setting and the fix when the server cannot serve as a CDC source."""
    names = ["log_bin", "binlog_format", "binlog_row_image", "binlog_row_value_options"]
    variables = _global_variables(conn, names)
    where = f"MySQL at {options.address}"
    cnf = "and in the server config ([mysqld] section of my.cnf) so it survives restarts"
    if variables.get("log_bin", "OFF").upper() not in ("ON", "1"):
        raise SourceError(
            f"{where}: binary logging is disabled (log_bin=OFF); start the server with --log-bin "
            "(log-bin=mysql-bin, binlog_format=ROW, binlog_row_image=FULL in my.cnf) and restart it"
        )
    fmt = variables.get("binlog_format", "").upper()
    if fmt != "ROW":
        raise SourceError(
            f"{where}: binlog_format is {fmt or 'unknown'} but CDC needs ROW: run SET GLOBAL binlog_format='ROW' "
            f"{cnf} (sessions already open keep the old format until they reconnect)"
        )
    image = variables.get("binlog_row_image", "FULL").upper()
    if image != "FULL":
        raise SourceError(
            f"{where}: binlog_row_image is {image} but CDC needs FULL: run SET GLOBAL binlog_row_image='FULL' {cnf}"
        )
    # MySQL 8: partial JSON updates are a form the binlog reader stops at (it checks each event too: a writer session
    # may set it for itself). Compressed transactions (binlog_transaction_compression) are decoded.
    if "PARTIAL_JSON" in variables.get("binlog_row_value_options", "").upper():
        raise SourceError(
            f"{where}: binlog_row_value_options is PARTIAL_JSON: MySQL then logs JSON updates as diffs, which lakecdc "
            f"does not apply. Run SET GLOBAL binlog_row_value_options='' {cnf}"
        )
    # binlog_row_metadata may be anything (MINIMAL: MySQL 8's default, NO_LOG: MariaDB's, FULL, or a server too old
    # to have the setting): the binlog reader names and types row columns from lakecdc's schema history, and uses
    # FULL metadata, where the server logs it, only as a cross-check (lakecdc.source.columns).
    # REPLICATION CLIENT / BINLOG MONITOR: SHOW MASTER STATUS
    head = head_offset(conn, options)
    # REPLICATION SLAVE: SHOW GRANTS, and when it does not say so (roles, proxies), a real binlog dump
    privileges = granted_globally(conn)
    if privileges is not None and (
        "ALL PRIVILEGES" in privileges or "REPLICATION SLAVE" in privileges or "REPLICATION REPLICA" in privileges
    ):
        return
    failure = _probe_binlog_dump(options, head)
    if failure is not None:
        if error_code(failure) in (1227, 1045, 1142, 1044):
            raise SourceError(_privilege_message(conn, options, "REPLICATION SLAVE", failure))
        raise SourceError(f"{where}: reading the binlog failed: {driver_reason(failure)}")


def free_server_id(options: MySqlSourceOptions) -> int:
    """The first id of the ``server-id`` range that no registered replica uses (the first id when all are used or
    the replicas cannot be listed)."""
    ids = options.server_ids
    if len(ids) == 1:
        return ids[0]
    taken = registered_replica_ids(options)
    return next((sid for sid in ids if sid not in taken), ids[0])


def registered_replica_ids(options: MySqlSourceOptions) -> set[int]:
    """Server ids of the replicas registered on the server (SHOW SLAVE HOSTS); empty when not readable (the
    statement needs REPLICATION MASTER ADMIN on MariaDB ≥ 10.5.2, REPLICATION SLAVE on MySQL)."""
    try:
        conn = connect(options)
    except SourceError:
        return set()
    try:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            try:
                cur.execute("SHOW SLAVE HOSTS")
            except pymysql.MySQLError:
                try:
                    cur.execute("SHOW REPLICAS")  # MySQL >= 8.4
                except pymysql.MySQLError:
                    return set()
            return {int(row[0]) for row in cur.fetchall()}
    finally:
        conn.close()


class BinlogDumpConnection(Connection):
    """The connection of python-mysql-replication's control and dump connections. Once it has asked for a binlog
    dump, every packet it reads that carries a compressed event is turned into the plain events it holds before the
    library parses them (lakecdc.source.compressed_events): a MariaDB compressed event into its plain event, a MySQL
    TRANSACTION_PAYLOAD event into the events of its transaction, handed over one per read, so no compressed rows or
    DDL are lost. A compressed event that cannot be decoded goes on marked with the reason, for the binlog reader to
    stop at (lakecdc.source.event_types)."""

    _dumping = False
    _payload: Iterator[MysqlPacket] | None = None  # the inner events of a TRANSACTION_PAYLOAD not yet handed over

    def _write_bytes(self, data):
        # a command packet: 3 bytes of length, a sequence number, then the command
        if len(data) > 4 and data[4] in (COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID):
            self._dumping = True
        return super()._write_bytes(data)

    def _read_packet(self, packet_type=MysqlPacket):
        if self._payload is not None:
            inner = next(self._payload, None)
            if inner is not None:
                return inner
            self._payload = None
        packet = super()._read_packet(packet_type)
        if self._dumping:
            data = packet.get_all_data()  # an event: the OK byte, then its header (the type is its fifth byte)
            if len(data) > TYPE_AT and data[TYPE_AT] in WIRE_REWRITTEN and data[0] == 0:
                return self._decoded(packet, data[TYPE_AT])
        return packet

    def _decoded(self, packet: MysqlPacket, event_type: int) -> MysqlPacket:
        if event_type == TRANSACTION_PAYLOAD_EVENT:
            self._payload = payload_packets(packet)
            return next(self._payload)  # at least one packet: an inner event, or the payload marked undecoded
        try:
            return uncompressed_packet(packet)
        except SourceError as exc:
            return undecoded_packet(packet, str(exc))


def pymysql_connect(**kwargs):
    """The connection of python-mysql-replication's control and dump connections (a :class:`BinlogDumpConnection`);
    the library passes the deprecated 'db' and 'passwd' names."""
    if "db" in kwargs:
        kwargs["database"] = kwargs.pop("db")
    if "passwd" in kwargs:
        kwargs["password"] = kwargs.pop("passwd")
    return BinlogDumpConnection(**kwargs)


def event_start(ev) -> int:
    """Where a binlog event starts in its file: its end position minus its size there (for a compressed event
    read as its plain form, the compressed size)."""
    return ev.packet.log_pos - getattr(ev.packet.packet, "stored_event_size", ev.packet.event_size)


class BinlogStream(BinLogStreamReader):
    """python-mysql-replication's reader, told to read the table maps' optional metadata always.

    The library decides whether to parse it from the server's global binlog_row_metadata when it connects, not
    from the events: events written with FULL and read after the setting changed would lose their names, and
    events written with MINIMAL would be read as if FULL when the setting is FULL now. Parsing what each event
    carries is always right (an event without it yields nothing); lakecdc.source.columns then names columns from
    the schema history and uses the event's own FULL metadata only as a cross-check."""

    def _BinLogStreamReader__check_optional_meta_data(self):  # replaces the library's private check
        self._BinLogStreamReader__optional_meta_data = True


def open_binlog_stream(options: MySqlSourceOptions, *, only_events: list[type], settings: dict | None = None,
                       server_id: int | None = None, **reader_options) -> BinlogStream:
    """The one place a binlog dump is opened: the source's connection settings (or ``settings``), a free id of
    the ``server-id`` range unless ``server_id`` is given, no library logging, and pymysql's current argument
    names; ``reader_options`` go to BinLogStreamReader as they are (position, blocking, ...).

    The stream delivers the event classes in ``only_events`` and every event that may carry rows or DDL
    (lakecdc.source.event_types): NotImplementedEvent (types the library does not parse) and the class of every
    type the library parses that is not known to be ignorable. The library drops only the events of the ignorable
    types a caller did not ask for."""
    return BinlogStream(
        connection_settings=settings if settings is not None else connection_kwargs(options),
        server_id=server_id if server_id is not None else free_server_id(options),
        enable_logging=False,
        pymysql_wrapper=pymysql_connect,
        only_events=[*only_events, *(cls for cls in undecided_event_classes() if cls not in only_events)],
        filter_non_implemented_events=False,
        **reader_options,
    )


def library_event_classes() -> dict[int, type]:
    """python-mysql-replication's event type → the class it parses the event as (its private map: the version is
    pinned in constraints.txt, and tests compare it with lakecdc.source.event_types)."""
    return dict(BinLogPacketWrapper._BinLogPacketWrapper__event_map)


def undecided_event_classes() -> list[type]:
    """The classes every binlog stream delivers whoever asked: NotImplementedEvent, and the class of each type the
    library parses that lakecdc neither reads nor knows to be ignorable (none in the pinned version: this keeps a
    newer library from dropping one silently). A reader of rows asks for the classes of the types it reads."""
    classes = [NotImplementedEvent]
    for event_type, cls in library_event_classes().items():
        if event_type not in READ and not is_ignorable(event_type) and cls not in classes:
            classes.append(cls)
    return classes

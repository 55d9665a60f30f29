"""A cheap scan of the binlog: which captured tables a stretch of it touches, without decoding any row.

The sensor and ``lakecdc status`` use it to tell a table that is really behind (a committed change or DDL of its
source tables lies after its checkpoint) from one whose checkpoint merely trails a head that other databases moved.

The scan reads the binlog over the replication protocol (``COM_BINLOG_DUMP`` as ``mysqlbinlog`` does: server id 0,
non-blocking, so it never displaces a replica or a lakecdc binlog reader that uses a server id of the range) and
parses the event frames straight from the socket buffer: only event headers, table-map events (database and table
names), query events (statements) and the transaction boundaries (GTID, Xid, XA PREPARE); MySQL's compressed
transactions (TRANSACTION_PAYLOAD) are decompressed and their events read the same way. Rows events are skipped
by their length. python-mysql-replication with ``only_events`` builds an object per packet and describes every
table map: 2x slower on bulk rows events, 40x on one-row transactions (bench/activity_bench.py,
docs/operations.md).

Transactions count as the binlog reader (lakecdc.source.binlog) applies them: a group's tables changed at the end
of its commit (Xid, ``COMMIT``, ``ROLLBACK`` — non-transactional rows stay — or the end of a stand-alone statement),
an XA transaction when its ``XA COMMIT`` arrives (prepared ones are carried over to the next scan), nothing after
``stop``. Statements are attributed conservatively: DDL or statement-logged DML that names a captured table (or
its database's tables, when the statement cannot be attributed) touches it. An event that may carry rows or DDL
and cannot be read here (a type lakecdc does not know, a compressed event it cannot decode; see
lakecdc.source.event_types) touches every table: the binlog reader stops at it, naming it, so a run must be
started to say so.
"""

from __future__ import annotations

import re
import struct
import time
from dataclasses import dataclass, field

import pymysql

from lakecdc.errors import BinlogPurgedError, SourceError
from lakecdc.model import BinlogOffset, TableId
from lakecdc.source.compressed_events import decompress, payload_events
from lakecdc.source.connection import connect, driver_reason, error_code, query, text
from lakecdc.source.event_types import ANONYMOUS_GTID_LOG_EVENT as MYSQL_ANONYMOUS_GTID
from lakecdc.source.event_types import EXECUTE_LOAD_QUERY_EVENT as EXECUTE_LOAD_QUERY
from lakecdc.source.event_types import FORMAT_DESCRIPTION_EVENT as FORMAT_DESCRIPTION
from lakecdc.source.event_types import GTID_LOG_EVENT as MYSQL_GTID
from lakecdc.source.event_types import MARIADB_GTID_EVENT as MARIADB_GTID
from lakecdc.source.event_types import MARIADB_QUERY_COMPRESSED_EVENT as MARIADB_QUERY_COMPRESSED
from lakecdc.source.event_types import QUERY_EVENT as QUERY
from lakecdc.source.event_types import ROTATE_EVENT as ROTATE
from lakecdc.source.event_types import ROWS_EVENTS, is_ignorable
from lakecdc.source.event_types import TABLE_MAP_EVENT as TABLE_MAP
from lakecdc.source.event_types import TRANSACTION_PAYLOAD_EVENT as TRANSACTION_PAYLOAD
from lakecdc.source.event_types import XA_PREPARE_LOG_EVENT as XA_PREPARE
from lakecdc.source.event_types import XID_EVENT as XID
from lakecdc.source.options import MySqlSourceOptions

_MARIADB_STANDALONE = 0x01  # FL_STANDALONE: a statement without COMMIT / Xid
_HEADER = 19  # timestamp 4, type 1, server id 4, event size 4, end position 4, flags 2
_FLAGS_AT = 17
_MAX_PACKET = 0xFFFFFF
_READ_CHUNK = 1 << 20

_CONTROL = re.compile(r"(?is)^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE\s+SAVEPOINT|XA\s+(START|BEGIN|END)\b)")
_XA = re.compile(r"(?is)^\s*XA\s+(START|BEGIN|END|PREPARE|COMMIT|ROLLBACK)\s+(.*?)\s*(ONE\s+PHASE)?\s*$")
_DML = re.compile(r"(?is)^\s*(INSERT|UPDATE|DELETE|REPLACE|LOAD\s+DATA|LOAD\s+XML)\b")
_DATABASE_DDL = re.compile(r"(?is)^\s*(CREATE|ALTER|DROP)\s+(DATABASE|SCHEMA)\s+(IF\s+(NOT\s+)?EXISTS\s+)?`?([^`\s;]+)")
# statements that change neither rows nor table definitions (privileges, routines, maintenance)
_HARMLESS = re.compile(r"(?is)^\s*(GRANT|REVOKE|(CREATE|ALTER|DROP|RENAME)\s+USER|SET\s+PASSWORD|FLUSH|ANALYZE|"
                       r"OPTIMIZE|REPAIR|CHECK|(CREATE|ALTER|DROP)\s+(DEFINER\s*=\s*\S+\s+)?(PROCEDURE|FUNCTION|EVENT|"
                       r"ROLE|SERVER)|CREATE\s+(OR\s+REPLACE\s+)?(DEFINER\s*=\s*\S+\s+)?(SQL\s+SECURITY\s+\w+\s+)?"
                       r"(ALGORITHM\s*=\s*\w+\s+)?VIEW|DROP\s+VIEW|SAVEPOINT|# Dummy)")
_UNSEEN = object()
EVERYTHING = TableId("*", "*")  # a group that may have touched any table (it cannot be read cheaply)


@dataclass
class BinlogActivity:
    """What a scan of the binlog between ``start`` and ``stop`` found for the captured tables."""

    start: BinlogOffset
    stop: BinlogOffset
    # captured source table (or EVERYTHING) → end of the last committed transaction / DDL in the stretch touching it
    changed: dict[TableId, BinlogOffset] = field(default_factory=dict)
    # XA transactions prepared in (or before) the stretch and not yet committed at ``stop``: xid → tables
    prepared_xa: dict[str, list[TableId]] = field(default_factory=dict)
    tables: frozenset[TableId] = frozenset()  # the tables the scan looked for
    bytes_scanned: int = 0
    events: int = 0
    seconds: float = 0.0

    def merge(self, later: "BinlogActivity") -> "BinlogActivity":
        """This stretch followed by ``later`` (which starts where this one stops): one stretch."""
        changed = dict(self.changed)
        for table, offset in later.changed.items():
            if table not in changed or changed[table] < offset:
                changed[table] = offset
        return BinlogActivity(min(self.start, later.start), max(self.stop, later.stop), changed,
                              dict(later.prepared_xa), self.tables & later.tables,
                              self.bytes_scanned + later.bytes_scanned,
                              self.events + later.events, self.seconds + later.seconds)

    def to_json(self) -> dict:
        return {"from": str(self.start), "to": str(self.stop),
                "changed": {str(t): str(o) for t, o in sorted(self.changed.items(), key=lambda i: str(i[0]))},
                "xa": {x: [str(t) for t in tables] for x, tables in self.prepared_xa.items()},
                "tables": sorted(str(t) for t in self.tables)}

    @classmethod
    def from_json(cls, data: dict) -> "BinlogActivity":
        return cls(parse_offset(data["from"]), parse_offset(data["to"]),
                   {TableId.parse(t): parse_offset(o) for t, o in data.get("changed", {}).items()},
                   {x: [TableId.parse(t) for t in tables] for x, tables in data.get("xa", {}).items()},
                   frozenset(TableId.parse(t) for t in data.get("tables", [])))

    def last_change(self, sources: list[TableId]) -> BinlogOffset | None:
        """The end of the last committed change to any of ``sources`` in the stretch (None: none)."""
        found = [self.changed[s] for s in (*sources, EVERYTHING) if s in self.changed]
        return max(found) if found else None


@dataclass
class _Group:
    tables: set = field(default_factory=set)
    multi: bool = False  # ends with Xid / COMMIT / ROLLBACK / XA PREPARE; else a stand-alone statement ends it
    xid: str | None = None


def parse_offset(value: str) -> BinlogOffset:
    """``file:pos`` (as ``str(BinlogOffset)`` writes it) as a BinlogOffset."""
    file, _, pos = value.rpartition(":")
    return BinlogOffset(file, int(pos))


def binlog_sizes(options: MySqlSourceOptions) -> dict[str, int]:
    """Each binlog file the server has → its size in bytes (SHOW BINARY LOGS)."""
    conn = connect(options)
    try:
        return {text(row[0]): int(row[1]) for row in query(conn, "SHOW BINARY LOGS", options=options)}
    finally:
        conn.close()


def bytes_between(sizes: dict[str, int], start: BinlogOffset, stop: BinlogOffset) -> int | None:
    """Binlog bytes from ``start`` to ``stop`` (None when ``start``'s file is gone)."""
    if stop <= start:
        return 0
    if start.file not in sizes:
        return None
    if start.file == stop.file:
        return stop.pos - start.pos
    files = sorted(sizes, key=lambda f: BinlogOffset(f, 0).sort_key)
    total = sizes[start.file] - start.pos
    for name in files:
        if BinlogOffset(start.file, 0) < BinlogOffset(name, 0) < BinlogOffset(stop.file, 0):
            total += sizes[name]
    return total + stop.pos


def scan_activity(options: MySqlSourceOptions, tables: set[TableId], start: BinlogOffset, stop: BinlogOffset, *,
                  prepared_xa: dict[str, list[TableId]] | None = None,
                  max_seconds: float | None = None) -> BinlogActivity:
    """Which of ``tables`` the committed transactions and statements between ``start`` and ``stop`` (both
    transaction boundaries, ``stop`` at most the head) touch. ``prepared_xa``: XA transactions a previous scan
    left prepared. ``max_seconds``: stop at the first commit after that long; the result's ``stop`` then says how
    far it got. BinlogPurgedError when ``start``'s file is gone."""
    activity = BinlogActivity(start, stop, prepared_xa={k: list(v) for k, v in (prepared_xa or {}).items()},
                              tables=frozenset(tables))
    if stop <= start:
        return activity
    started = time.monotonic()
    scanner = _Scanner(tables, activity)
    scanner.deadline = started + max_seconds if max_seconds is not None else None
    conn = dump(options, start)
    try:
        scanner.run(conn)
    except _OutOfTime as cut:
        activity.stop = cut.offset
    except pymysql.MySQLError as exc:
        if error_code(exc) == 1236:
            raise BinlogPurgedError(f"binlog scan from {start}: the server at {options.address} no longer has "
                                    f"that part of the binlog ({driver_reason(exc)})") from None
        raise SourceError(f"binlog scan from {start} on {options.address} failed: {driver_reason(exc)}") from None
    except OSError as exc:
        raise SourceError(f"binlog scan from {start} on {options.address} failed: {exc}") from None
    finally:
        conn.close()
    activity.seconds = time.monotonic() - started
    return activity


def dump(options: MySqlSourceOptions, start: BinlogOffset):
    """A connection streaming the binlog from ``start`` (COM_BINLOG_DUMP, non-blocking, server id 0)."""
    conn = connect(options)
    try:
        checksum = text(query(conn, "SELECT @@global.binlog_checksum", options=options)[0][0]) or "NONE"
        with conn.cursor() as cur:
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @mariadb_slave_capability = 4")  # GTID events as they are (MariaDB)
        payload = struct.pack("<BIHI", 0x12, start.pos, 0x01, 0) + start.file.encode()
        conn._write_bytes(struct.pack("<I", len(payload))[:3] + b"\x00" + payload)
        conn._next_seq_id = 1
    except pymysql.MySQLError as exc:
        conn.close()
        raise SourceError(f"cannot start a binlog scan on {options.address}: {driver_reason(exc)}") from None
    conn.lakecdc_checksum = 4 if checksum.upper() != "NONE" else 0
    return conn


class _OutOfTime(Exception):
    def __init__(self, offset: BinlogOffset):
        super().__init__(str(offset))
        self.offset = offset


_TIME_CHECK_EVERY = 1024  # commits between two looks at the clock


class EventFrames:
    """Reads the event frames of a binlog dump (see :func:`dump`) straight from the socket buffer, calling
    :meth:`event` with each event's bytes until it returns True or the binlog ends; follows the file names
    (``file``) and, with ``stop``, says when a file lies past it."""

    def __init__(self, start: BinlogOffset, stop: BinlogOffset):
        self.file = start.file
        self.stop = stop
        self.stop_pos = stop.pos
        self.in_stop_file = False
        self.checksum = 0  # bytes of checksum at each event's end

    def run(self, conn) -> None:
        self.checksum = conn.lakecdc_checksum
        self._entered(self.file)
        rfile = conn._rfile
        buf = b""
        partial: list[bytes] = []  # an event longer than one 16 MiB packet
        while True:
            chunk = rfile.read1(_READ_CHUNK)
            if not chunk:
                raise OSError("the server closed the binlog stream")
            buf = buf + chunk if buf else chunk
            i, size = 0, len(buf)
            while size - i >= 4:
                length = buf[i] | buf[i + 1] << 8 | buf[i + 2] << 16
                end = i + 4 + length
                if end > size:
                    break
                data, p, i = buf, i + 4, end
                if partial or length == _MAX_PACKET:
                    partial.append(buf[p:end])
                    if length == _MAX_PACKET:
                        continue
                    data, partial = b"".join(partial), []
                    p, end = 0, len(data)
                status = data[p]
                if status == 0xFE and end - p < 9:
                    return  # end of the binlog (non-blocking dump)
                if status == 0xFF:
                    code = struct.unpack_from("<H", data, p + 1)[0]
                    message = data[p + 3:end]
                    message = message[6:] if message[:1] == b"#" else message
                    raise pymysql.err.OperationalError(code, message.decode("utf-8", "replace"))
                if self.event(data, p + 1, end):
                    return
            buf = buf[i:]

    def _entered(self, file: str) -> bool:
        """Now reading ``file``; True when it lies after the stop position's file."""
        self.file = file
        self.in_stop_file = file == self.stop.file
        return BinlogOffset(file, 4) > self.stop and not self.in_stop_file

    def event(self, data: bytes, p: int, end: int) -> bool:
        raise NotImplementedError

    def rotated(self, data: bytes, p: int, end: int) -> bool:
        """A rotate event at ``data[p:end]``: follow it; True when its file lies past the stop position."""
        return self._entered(data[p + _HEADER + 8:end - self.checksum].decode())

    def payload(self, data: bytes, p: int, end: int) -> bool:
        """The events of the TRANSACTION_PAYLOAD event at ``data[p:end]``, each handed to :meth:`event` (they have
        no checksum); False when it cannot be decoded."""
        checksum, self.checksum = self.checksum, 0
        try:
            for inner in payload_events(data[p:end]):
                self.event(inner, 0, len(inner))
        except SourceError:
            return False
        finally:
            self.checksum = checksum
        return True


class _Scanner(EventFrames):
    def __init__(self, tables: set[TableId], activity: BinlogActivity):
        super().__init__(activity.start, activity.stop)
        self.activity = activity
        self.tables = set(tables)
        self.by_database: dict[str, list[TableId]] = {}
        for t in self.tables:
            self.by_database.setdefault(t.database, []).append(t)
        self.group: _Group | None = None
        self.query_post_header = 13
        self.load_query_post_header = 26
        self.table_map_post_header = 8
        self.deadline: float | None = None
        self.commits = 0
        self.maps: dict[bytes, TableId | None] = {}  # table-map names → captured table (None: not captured)

    def event(self, data: bytes, p: int, end: int) -> bool:
        """Handle the event at ``data[p:end]`` (header first); True once past the stop position."""
        kind = data[p + 4]
        end_pos = data[p + 13] | data[p + 14] << 8 | data[p + 15] << 16 | data[p + 16] << 24
        if kind == ROTATE:
            return self.rotated(data, p, end)
        if kind == FORMAT_DESCRIPTION:
            post_headers = data[p + _HEADER + 2 + 50 + 4 + 1:]
            self.query_post_header = post_headers[QUERY - 1]
            self.load_query_post_header = post_headers[EXECUTE_LOAD_QUERY - 1]
            self.table_map_post_header = post_headers[TABLE_MAP - 1]
            return False
        if end_pos == 0:
            return False  # an artificial event of the dump protocol
        if self.in_stop_file and end_pos > self.stop_pos:
            return True
        activity = self.activity
        activity.events += 1
        activity.bytes_scanned += end - p
        if kind == TABLE_MAP:
            body = p + _HEADER + self.table_map_post_header
            names_end = body + 1 + data[body] + 1
            names_end += 1 + data[names_end]
            raw = data[body:names_end]
            table_id = self.maps.get(raw, _UNSEEN)
            if table_id is _UNSEEN:
                length = data[body]
                table_id = TableId(data[body + 1:body + 1 + length].decode("utf-8", "replace"),
                                   data[body + 2 + length + 1:names_end].decode("utf-8", "replace"))
                table_id = self.maps[raw] = table_id if table_id in self.tables else None
            if self.group is None:  # rows with no GTID / BEGIN seen (a start inside a transaction)
                self.group = _Group(multi=True)
            if table_id is not None:
                self.group.tables.add(table_id)
            return False
        if kind in ROWS_EVENTS:  # its table is its table map's
            return False
        if kind == MARIADB_GTID:
            flags = data[p + _HEADER + 12]
            self.group = _Group(multi=not flags & _MARIADB_STANDALONE)
            return False
        if kind in (MYSQL_GTID, MYSQL_ANONYMOUS_GTID):
            self.group = _Group(multi=False)  # BEGIN follows for DML, DDL stands alone
            return False
        if kind == XID:
            self.commit(end_pos)
            return False
        if kind == XA_PREPARE:
            group, self.group = self.group, None
            if group is not None and group.xid is not None:
                activity.prepared_xa[group.xid] = sorted(group.tables | set(activity.prepared_xa.get(group.xid, [])),
                                                         key=str)
            elif group is not None and group.tables:
                self.touch(group.tables, end_pos)  # an XA PREPARE without XA START: count it now (conservative)
            return False
        if kind in (QUERY, MARIADB_QUERY_COMPRESSED, EXECUTE_LOAD_QUERY):
            self.statement(data, p, end, kind, end_pos)
            return False
        if kind == TRANSACTION_PAYLOAD and self.payload(data, p, end):  # MySQL's compressed transaction
            return False
        if not is_ignorable(kind, data[p + _FLAGS_AT] | data[p + _FLAGS_AT + 1] << 8):
            # an event that may carry rows or DDL and cannot be read here (a type lakecdc does not know, a payload
            # it cannot decode): any table may have changed; the binlog reader stops at it, naming it
            self.touch({EVERYTHING}, end_pos)
        return False

    def statement(self, data: bytes, p: int, end: int, kind: int, here: int) -> None:
        body = p + _HEADER
        db_length = data[body + 8]
        status_length = struct.unpack_from("<H", data, body + 11)[0]
        post_header = self.load_query_post_header if kind == EXECUTE_LOAD_QUERY else self.query_post_header
        db_start = body + post_header + status_length
        database = data[db_start:db_start + db_length].decode("utf-8", "replace")
        raw = data[db_start + db_length + 1:end - self.checksum]
        if kind == MARIADB_QUERY_COMPRESSED:
            try:
                raw = decompress(raw, f"binlog event ending at {self.file}:{here}")[0]
            except SourceError:  # the binlog reader stops at it, naming it: any table may have changed
                self.touch({EVERYTHING}, here)
                return
        statement = raw.decode("utf-8", "replace").strip()
        upper = statement[:24].upper()
        xa = _XA.match(statement) if upper.startswith("XA") else None
        if xa:
            verb, xid = xa.group(1).upper(), xa.group(2)
            if verb in ("START", "BEGIN", "END"):  # MariaDB logs no XA START: its XA END names the transaction
                self.group = self.group or _Group()
                self.group.multi, self.group.xid = True, xid
            elif verb == "COMMIT" and xa.group(3):  # one phase: an ordinary commit
                self.commit(here)
            elif verb == "COMMIT":
                tables = self.activity.prepared_xa.pop(xid, None)
                self.touch(set(tables) if tables is not None else {EVERYTHING}, here)
                self.group = None
            elif verb == "ROLLBACK":
                self.activity.prepared_xa.pop(xid, None)
                self.group = None
            return
        if _CONTROL.match(statement):
            word = upper.split()[0] if upper.split() else ""
            if word == "BEGIN":
                self.group = self.group or _Group()
                self.group.multi = True
            elif word in ("COMMIT", "ROLLBACK") and not upper.startswith("ROLLBACK TO"):
                # ROLLBACK is logged for transactions that changed non-transactional tables: their rows stay
                self.commit(here)
            return
        if self.group is None:
            self.group = _Group()
        self.group.tables |= self.attribute(statement, database)
        if not self.group.multi:
            self.commit(here)

    def attribute(self, statement: str, database: str) -> set[TableId]:
        """The captured tables a DDL or statement-logged DML may touch (conservative)."""
        if _HARMLESS.match(statement):
            return set()
        whole = _DATABASE_DDL.match(statement)
        if whole:
            return set(self.by_database.get(whole.group(5), []))
        plain = statement.replace("`", "").lower()
        words = set(re.findall(r"[\w$]+", plain))
        named = {t for t in self.tables if _named(t.table.lower(), plain, words)
                 and (t.database == database or t.database.lower() in plain)}
        if named or _DML.match(statement):
            return named
        # DDL naming no captured table: only its own tables' database can be affected, and only when the parser
        # could not tell which table it names
        return set(self.by_database.get(database, [])) if not _names_table(statement) else set()

    def commit(self, end_pos: int) -> None:
        group, self.group = self.group, None
        if group is not None and group.tables:
            self.touch(group.tables, end_pos)
        self.commits += 1
        if self.deadline is not None and self.commits % _TIME_CHECK_EVERY == 0 and time.monotonic() > self.deadline:
            raise _OutOfTime(BinlogOffset(self.file, end_pos))  # a transaction boundary

    def touch(self, tables, end_pos: int) -> None:
        here = BinlogOffset(self.file, end_pos)
        changed = self.activity.changed
        for table in tables:
            if table not in changed or changed[table] < here:
                changed[table] = here


_NAMED_TABLE = re.compile(r"(?is)^\s*(CREATE\s+(TEMPORARY\s+)?TABLE|ALTER\s+(ONLINE\s+|IGNORE\s+)*TABLE|"
                          r"DROP\s+(TEMPORARY\s+)?TABLE|TRUNCATE(\s+TABLE)?|RENAME\s+TABLE|CREATE\s+(UNIQUE\s+|"
                          r"FULLTEXT\s+|SPATIAL\s+)?INDEX|DROP\s+INDEX|CREATE\s+(OR\s+REPLACE\s+)?(DEFINER\s*=\s*\S+"
                          r"\s+)?TRIGGER|DROP\s+TRIGGER|CREATE\s+OR\s+REPLACE\s+TABLE)\b")


def _named(name: str, plain: str, words: set[str]) -> bool:
    if re.fullmatch(r"[\w$]+", name):
        return name in words
    return re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", plain) is not None


def _names_table(statement: str) -> bool:
    """Whether the statement is a table DDL whose table names are in its text (so a statement that names none of
    the captured tables does not touch them)."""
    return _NAMED_TABLE.match(statement) is not None


"""Every binlog event type, and what lakecdc does with it: read it, pass over it, or stop.

A binlog read must never move its checkpoint past an event that may have carried rows or DDL of a captured table
without applying them. So each event type the server may send is in exactly one of three places:

- ``READ``: it may carry rows, DDL or a transaction's boundary, and lakecdc reads it. The binlog reader
  (lakecdc.source.binlog) decides every such event itself: it applies rows, DDL and transaction boundaries, and
  stops at forms it cannot apply (statement-logged DML, partial row images, MySQL's partial JSON updates).
  Compressed forms are turned into plain events on the wire before that (lakecdc.source.compressed_events:
  MariaDB's compressed query and rows events, MySQL 8's TRANSACTION_PAYLOAD).
- ``IGNORABLE``: known to carry neither rows nor DDL that another, read event does not carry: heartbeats, file
  markers and formats (the replication library reads those itself), GTID bookkeeping, the statement text MySQL and
  MariaDB add before rows events, and the pieces of statement logging (INTVAR, RAND, USER_VAR, the file blocks of
  LOAD DATA) that only feed the statement event that follows them, which is itself read (and stops the read when it
  changes a captured table).
- everything else stops the read at the event, before anything past it is committed, with an error that names the
  event type, its binlog position and what to do (:func:`unread_event_problem`): an INCIDENT event (the server lost
  changes), old MySQL 4.x/5.0 LOAD DATA events and pre-GA rows events, MySQL 8.4's tagged GTIDs, a compressed event
  lakecdc could not decode, and every type lakecdc does not know.

A type lakecdc does not know passes only when its event carries ``LOG_EVENT_IGNORABLE_F``: the server's own
statement that a replica which does not know the type may skip it (MySQL and MariaDB replicas follow that rule;
without the flag they stop too).

python-mysql-replication would drop events silently in two ways: types it does not parse (NotImplementedEvent,
filtered by default) and types it parses whose class a reader did not ask for. lakecdc.source.connection's
``open_binlog_stream`` therefore always lets NotImplementedEvent through and adds the class of every type that is
neither read nor ignorable; the binlog reader asks for the classes of every ``READ`` type (tests check both
against the library's event map) and stops at any event it does not handle.
"""

from __future__ import annotations

# --- read: rows, DDL, transaction boundaries (lakecdc.source.binlog; lakecdc.source.activity scans them too)
QUERY_EVENT = 0x02
XID_EVENT = 0x10
EXECUTE_LOAD_QUERY_EVENT = 0x12  # a statement-logged LOAD DATA: stops the read when it loads a captured table
TABLE_MAP_EVENT = 0x13
WRITE_ROWS_EVENT_V1, UPDATE_ROWS_EVENT_V1, DELETE_ROWS_EVENT_V1 = 0x17, 0x18, 0x19
WRITE_ROWS_EVENT_V2, UPDATE_ROWS_EVENT_V2, DELETE_ROWS_EVENT_V2 = 0x1E, 0x1F, 0x20
GTID_LOG_EVENT = 0x21
XA_PREPARE_LOG_EVENT = 0x26  # MySQL 8, MariaDB >= 10.5: ends an XA transaction's prepare group
PARTIAL_UPDATE_ROWS_EVENT = 0x27  # MySQL 8 binlog_row_value_options=PARTIAL_JSON: stops the read, naming it
TRANSACTION_PAYLOAD_EVENT = 0x28  # MySQL 8.0.20+ binlog_transaction_compression: expanded on the wire
MARIADB_GTID_EVENT = 0xA2
MARIADB_QUERY_COMPRESSED_EVENT = 0xA5  # MariaDB log_bin_compress: rewritten to the plain event on the wire
MARIADB_ROWS_COMPRESSED_EVENTS = range(0xA6, 0xAC)  # write/update/delete, V1 0xA6-0xA8 and V2 0xA9-0xAB

ROWS_EVENTS = frozenset({WRITE_ROWS_EVENT_V1, UPDATE_ROWS_EVENT_V1, DELETE_ROWS_EVENT_V1, WRITE_ROWS_EVENT_V2,
                         UPDATE_ROWS_EVENT_V2, DELETE_ROWS_EVENT_V2, PARTIAL_UPDATE_ROWS_EVENT,
                         *MARIADB_ROWS_COMPRESSED_EVENTS})
READ = frozenset({QUERY_EVENT, XID_EVENT, EXECUTE_LOAD_QUERY_EVENT,
                  TABLE_MAP_EVENT, GTID_LOG_EVENT, XA_PREPARE_LOG_EVENT, TRANSACTION_PAYLOAD_EVENT,
                  MARIADB_GTID_EVENT, MARIADB_QUERY_COMPRESSED_EVENT, *ROWS_EVENTS})

# --- ignorable: no rows, no DDL
START_EVENT_V3 = 0x01  # the first event of a binlog written by MySQL 4.x and before
STOP_EVENT = 0x03  # the server shut down
ROTATE_EVENT = 0x04  # the next file's name (the replication library follows it)
FORMAT_DESCRIPTION_EVENT = 0x0F  # a file's format (the replication library reads its post-header lengths)
INTVAR_EVENT = 0x05  # LAST_INSERT_ID / INSERT_ID for the statement-logged query event that follows
APPEND_BLOCK_EVENT = 0x09  # a block of a statement-logged LOAD DATA's file (the Execute_load_query event is read)
DELETE_FILE_EVENT = 0x0B  # a statement-logged LOAD DATA failed: its file blocks are discarded
RAND_EVENT = 0x0D  # RAND() seeds for the statement-logged query event that follows
USER_VAR_EVENT = 0x0E  # a user variable for the statement-logged query event that follows
BEGIN_LOAD_QUERY_EVENT = 0x11  # the first block of a statement-logged LOAD DATA's file
HEARTBEAT_LOG_EVENT = 0x1B  # sent by the server while the stream is idle, never logged
IGNORABLE_LOG_EVENT = 0x1C  # by definition safe to ignore
ROWS_QUERY_LOG_EVENT = 0x1D  # MySQL binlog_rows_query_log_events: the statement text of the rows events after it
ANONYMOUS_GTID_LOG_EVENT = 0x22  # MySQL without GTIDs: starts a transaction (its BEGIN / DDL event follows)
PREVIOUS_GTIDS_LOG_EVENT = 0x23  # MySQL: the GTIDs of the earlier files, at a file's start
TRANSACTION_CONTEXT_EVENT = 0x24  # MySQL group replication: certification data
VIEW_CHANGE_EVENT = 0x25  # MySQL group replication: a membership change
HEARTBEAT_LOG_EVENT_V2 = 0x29  # MySQL 8.0.26+ heartbeat
MARIADB_ANNOTATE_ROWS_EVENT = 0xA0  # binlog_annotate_row_events: the statement text of the rows events after it
MARIADB_BINLOG_CHECKPOINT_EVENT = 0xA1  # the oldest file crash recovery needs
MARIADB_GTID_LIST_EVENT = 0xA3  # the GTID state at a file's start
MARIADB_START_ENCRYPTION_EVENT = 0xA4  # encrypt_binlog: the server decrypts the events after it before sending them

IGNORABLE = frozenset({START_EVENT_V3, STOP_EVENT, ROTATE_EVENT, FORMAT_DESCRIPTION_EVENT, INTVAR_EVENT,
                       APPEND_BLOCK_EVENT, DELETE_FILE_EVENT, RAND_EVENT, USER_VAR_EVENT, BEGIN_LOAD_QUERY_EVENT,
                       HEARTBEAT_LOG_EVENT, IGNORABLE_LOG_EVENT, ROWS_QUERY_LOG_EVENT, ANONYMOUS_GTID_LOG_EVENT,
                       PREVIOUS_GTIDS_LOG_EVENT, TRANSACTION_CONTEXT_EVENT, VIEW_CHANGE_EVENT, HEARTBEAT_LOG_EVENT_V2,
                       MARIADB_ANNOTATE_ROWS_EVENT, MARIADB_BINLOG_CHECKPOINT_EVENT, MARIADB_GTID_LIST_EVENT,
                       MARIADB_START_ENCRYPTION_EVENT})

# --- stop (named in messages; any other type stops too)
INCIDENT_EVENT = 0x1A
GTID_TAGGED_LOG_EVENT = 0x2A  # MySQL 8.4+: the GTID event of a tagged GTID
_OLD_LOAD_DATA = {0x06: "LOAD_EVENT", 0x08: "CREATE_FILE_EVENT", 0x0A: "EXEC_LOAD_EVENT", 0x0C: "NEW_LOAD_EVENT"}
_PRE_GA_ROWS = {0x14: "PRE_GA_WRITE_ROWS_EVENT", 0x15: "PRE_GA_UPDATE_ROWS_EVENT", 0x16: "PRE_GA_DELETE_ROWS_EVENT"}

LOG_EVENT_IGNORABLE_F = 0x80  # header flag: a replica that does not know the event type may skip it

_KNOWN = READ | IGNORABLE | {INCIDENT_EVENT, GTID_TAGGED_LOG_EVENT, *_OLD_LOAD_DATA, *_PRE_GA_ROWS}

_RESNAPSHOT = ("Nothing from this point on is committed; after changing the setting, re-snapshot the captured tables "
               "written since then (lakecdc resnapshot PIPELINE.yaml DB.TABLE, or the Dagster re-snapshot job)")


def is_ignorable(event_type: int, flags: int = 0) -> bool:
    """Whether an event of this type (with these header flags) carries neither rows nor DDL."""
    return event_type in IGNORABLE or (event_type not in _KNOWN and bool(flags & LOG_EVENT_IGNORABLE_F))


def unread_event_problem(event_type: int, position: str, *, flags: int = 0, undecoded: str | None = None) -> str | None:
    """None for an event the reader may pass over; else why the read stops at it and what to do. ``position`` is
    the binlog file and the event's end position; ``undecoded``: why a compressed event could not be decoded."""
    if undecoded is None and is_ignorable(event_type, flags):
        return None
    where = f"binlog event ending at {position}"
    if undecoded is not None:
        return (f"{where} ({event_name(event_type)}) could not be decoded: {undecoded}. It holds a whole "
                "transaction or statement, which may have changed captured tables, so the read stops here. Check "
                "the server's binlog (mysqlbinlog --start-position) and report it; to go on without it, set the "
                "compression off (MySQL: binlog_transaction_compression=OFF; MariaDB: log_bin_compress=OFF). "
                + _RESNAPSHOT)
    if event_type == INCIDENT_EVENT:
        return (f"{where} is an INCIDENT_EVENT: the server recorded that changes may be missing from its binlog "
                "(for example a statement that failed part-way on a non-transactional table), so the binlog no "
                "longer tells every change. Re-snapshot the captured tables (lakecdc resnapshot PIPELINE.yaml "
                "DB.TABLE, or the Dagster re-snapshot job)")
    if event_type == GTID_TAGGED_LOG_EVENT:
        return (f"{where} is the GTID event of a tagged GTID (MySQL 8.4+), which lakecdc does not read. Do not use "
                "tagged GTIDs (SET gtid_next with a tag) on a captured server. " + _RESNAPSHOT)
    if event_type in _OLD_LOAD_DATA or event_type in _PRE_GA_ROWS:
        return (f"{where} is a {event_name(event_type)}, written only by MySQL 5.1 and before, which lakecdc does "
                "not read. Read this binlog with a server of a supported version: MySQL 5.7+ or MariaDB 10.x with "
                "binlog_format=ROW. " + _RESNAPSHOT)
    return (f"{where} has type {event_type} (0x{event_type:02x}), which lakecdc does not read; it may carry rows or "
            "DDL of a captured table, so the read stops instead of passing over it. Check the server's binlog "
            "settings (lakecdc reads ROW events written with binlog_format=ROW, binlog_row_image=FULL) and the "
            "server version, and report this event type. " + _RESNAPSHOT)


def event_name(event_type: int) -> str:
    """The event type as MySQL names it, with its code."""
    names = {TRANSACTION_PAYLOAD_EVENT: "TRANSACTION_PAYLOAD_EVENT", MARIADB_QUERY_COMPRESSED_EVENT:
             "QUERY_COMPRESSED_EVENT", INCIDENT_EVENT: "INCIDENT_EVENT", **_OLD_LOAD_DATA, **_PRE_GA_ROWS}
    if event_type in MARIADB_ROWS_COMPRESSED_EVENTS:
        return f"compressed rows event, type {event_type} (0x{event_type:02x})"
    name = names.get(event_type)
    return f"{name}, type {event_type} (0x{event_type:02x})" if name else f"type {event_type} (0x{event_type:02x})"

"""GTID positions in both server dialects.

* MariaDB: a GTID *position* is a comma-separated list of the last transaction applied per replication domain,
  ``domain-server-sequence`` (``0-1-42,1-2-7``). Starting a binlog dump from it delivers the transactions after it.
* MySQL 8: a GTID *set* lists every executed transaction per source UUID as intervals
  (``3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42:50,...``; MySQL 8.3+ may tag them: ``uuid:tag:1-5``). Starting from
  it delivers the transactions not in it.

Checkpoints keep the GTID next to the file/position; file/position is what a run resumes from, the GTID is what a
user may give as ``scan.startup.specific-offset.gtid-set``.
"""

from __future__ import annotations

import re

from pymysqlreplication.gtid import Gtid, GtidSet

from lakecdc.errors import SourceError

_MARIADB_GTID = re.compile(r"^\d+-\d+-\d+$")
_UUID = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
_MYSQL_MEMBER = re.compile(rf"^({_UUID})((?::[A-Za-z_][A-Za-z0-9_]{{0,31}})?(?::\d+(?:-\d+)?)+)+$")


def _members(text: str) -> list[str]:
    return [m.strip() for m in text.replace("\n", "").split(",") if m.strip()]


def gtid_flavor(text: str) -> str:
    """'mariadb' or 'mysql' for a valid GTID position/set; SourceError (naming both forms) otherwise."""
    members = _members(text or "")
    if not members:
        raise SourceError("empty GTID set: expected a MariaDB position like 0-1-42 or a MySQL GTID set like "
                          "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42")
    if all(_MARIADB_GTID.match(m) for m in members):
        domains = [m.split("-")[0] for m in members]
        if len(set(domains)) != len(domains):
            raise SourceError(f"MariaDB GTID position {text!r} names a replication domain twice")
        return "mariadb"
    if all(_MYSQL_MEMBER.match(m) for m in members):
        return "mysql"
    raise SourceError(f"invalid GTID set {text!r}: expected a MariaDB position (domain-server-sequence, comma "
                      "separated, like 0-1-42) or a MySQL GTID set (uuid:interval[:interval], comma separated, "
                      "like 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42)")


def normalize(text: str) -> str:
    """The GTID text without whitespace/newlines (SHOW MASTER STATUS wraps long MySQL sets)."""
    return ",".join(_members(text or ""))


def advance(position: str, gtid: str) -> str:
    """The GTID position/set after transaction ``gtid`` (MariaDB ``d-s-n`` or MySQL ``uuid:n``) was applied; ''
    when ``position`` is unknown (an empty position cannot be extended safely)."""
    if not position or not gtid:
        return position or ""
    if _MARIADB_GTID.match(gtid):
        domain = gtid.split("-")[0]
        kept = [m for m in _members(position) if m.split("-")[0] != domain]
        return ",".join(sorted(kept + [gtid], key=lambda m: int(m.split("-")[0])))
    merged = GtidSet(normalize(position))
    merged.merge_gtid(Gtid(gtid))
    return str(merged)

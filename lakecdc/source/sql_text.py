"""A statement as the server executed it: comments removed, executable comments opened.

The binlog logs a statement as the client sent it. Applications, ORMs and dump tools put comments in front of and
inside statements (``/* app:checkout */ INSERT ...``, ``-- note``, ``# note``), and dump tools wrap statements in
executable comments (``/*!40000 ALTER TABLE t DISABLE KEYS */``, ``/*!50001 CREATE ... VIEW */``, MariaDB's
``/*M!100100 ... */``), whose text the server runs when its version is at least the number. Deciding whether a
statement is DML, DDL or a transaction boundary from its first word therefore needs the statement as executed:
:func:`executed_statement`. Quoted strings and identifiers are kept as they are (a ``/*`` inside a string is no
comment).
"""

from __future__ import annotations

import re

_MARKERS = ("/*", "--", "#")
_VERSIONED = re.compile(r"(M?)!(\d{5,6})?")
# MariaDB's per-statement settings: SET STATEMENT var = value [, ...] FOR statement
_SET_STATEMENT = re.compile(r"(?is)^SET\s+STATEMENT\s+(?:[^'\"`]|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`)*?"
                            r"\bFOR\s+")


def has_comment(statement: str) -> bool:
    """True when ``statement`` may hold a comment (a cheap test before :func:`executed_statement`)."""
    return any(marker in statement for marker in _MARKERS)


def executed_statement(statement: str, *, flavor: str, version: tuple[int, int, int]) -> str:
    """``statement`` without its comments, with the text of the executable comments the server ``flavor``
    ('mysql' or 'mariadb') at ``version`` runs, stripped; spaces stand where comments were."""
    if not has_comment(statement):
        return statement.strip()
    number = version[0] * 10000 + version[1] * 100 + version[2]
    out: list[str] = []
    i, n = 0, len(statement)
    while i < n:
        c = statement[i]
        if c in "'\"`":
            end = _quoted_end(statement, i)
            out.append(statement[i:end])
            i = end
        elif statement.startswith("/*", i):
            close = statement.find("*/", i + 2)
            close = n if close < 0 else close
            body = statement[i + 2:close]
            versioned = _VERSIONED.match(body)
            if versioned and _runs(versioned, flavor, number):
                # an executable comment the server runs: its text is part of the statement (it may hold comments)
                out.append(" " + executed_statement(body[versioned.end():], flavor=flavor, version=version) + " ")
            else:
                out.append(" ")
            i = close + 2
        elif statement.startswith("--", i) and (i + 2 == n or statement[i + 2] in " \t\r\n"):
            i = _line_end(statement, i)
            out.append(" ")
        elif c == "#":
            i = _line_end(statement, i)
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out).strip()


def _runs(versioned: re.Match, flavor: str, number: int) -> bool:
    """Whether the server runs an executable comment: ``/*!`` on both servers, ``/*M!`` on MariaDB only, when the
    version number (if any) is at most the server's. MariaDB skips ``/*!`` comments with MySQL 5.7+ version
    numbers (50700-99999): they hold MySQL-only syntax (sql_lex.cc)."""
    mariadb_only, digits = versioned.group(1), versioned.group(2)
    if mariadb_only and flavor != "mariadb":
        return False
    if digits is None:
        return True
    version = int(digits)
    if flavor == "mariadb" and not mariadb_only and 50700 <= version <= 99999:
        return False
    return version <= number


def without_set_statement(statement: str) -> str:
    """The statement a MariaDB ``SET STATEMENT ... FOR statement`` runs (``statement`` itself otherwise)."""
    if statement[:3].upper() != "SET":
        return statement
    match = _SET_STATEMENT.match(statement)
    return statement[match.end():] if match else statement


def _quoted_end(text: str, start: int) -> int:
    """The index after the quoted string or identifier starting at ``start`` (doubled quotes and, outside
    backticks, backslash escapes stay inside)."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == "\\" and quote != "`":
            i += 2
            continue
        if c == quote:
            if i + 1 < len(text) and text[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return len(text)


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end + 1


def quote_identifier(name: str, *, in_format: bool = False) -> str:
    """``name`` as a MySQL identifier in backquotes; ``in_format``: inside a PyMySQL format string (a statement with
    ``%s`` parameters), where a ``%`` of the name must be doubled."""
    quoted = "`" + name.replace("`", "``") + "`"
    return quoted.replace("%", "%%") if in_format else quoted


def qualified_table(database: str, table: str, *, in_format: bool = False) -> str:
    """```database`.`table``` for a statement (see :func:`quote_identifier`)."""
    return f"{quote_identifier(database, in_format=in_format)}.{quote_identifier(table, in_format=in_format)}"

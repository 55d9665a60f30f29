"""String functions: ``||``, ``CONCAT``, ``CONCAT_WS``, ``CHAR_LENGTH``, ``UPPER``, ``LOWER``, ``TRIM`` (all forms),
``LTRIM``/``RTRIM``/``BTRIM``, ``SUBSTR``/``SUBSTRING``, ``OVERLAY``, ``POSITION``/``LOCATE``/``INSTR``,
``LPAD``/``RPAD``, ``REPLACE``, ``REPEAT``, ``LEFT``/``RIGHT``, ``STARTSWITH``/``ENDSWITH``, ``TO_BASE64``,
``FROM_BASE64``, ``FROM_BASE64_BINARY``.

Every function returns NULL for a NULL argument (Flink CDC 3.6 fails the job for UPPER, LOWER, TRIM, CHAR_LENGTH
and SUBSTR), except ``||``/``CONCAT``, which render NULL as the text ``null`` as Flink CDC does. Positions and
lengths count characters (code points); CHAR_LENGTH counts UTF-16 units as Java does.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform.functions.base import (as_string, data_error, fam, function, grouped, is_null_literal,
                                              null_of, require, scatter, where_null, with_scalars)
from lakecdc.transform.nodes import Call, Literal, Node
from lakecdc.transform.types import MAX_BINARY_LENGTH, binary_of, java_to_string, utf8_decode

_BIG = 2 ** 62


def _strings(args: list[Node], what: str, count: int | None = None) -> None:
    for a in args[:count]:
        require(a, ("string",), what)


def _ints(args: list[Node], what: str) -> None:
    for a in args:
        require(a, ("numeric",), what)


# ------------------------------------------------------------------------------------------ concatenation

def _concat(args: list[Node], site) -> Node:
    """Flink CDC ``||`` / CONCAT: NULL is rendered as the text 'null', other values as Java toString()."""
    def run(env, xs):
        texts = [pc.fill_null(java_to_string(x, env.zone), "null") for x in xs]
        if len(texts) == 1:
            return texts[0]
        return pc.binary_join_element_wise(*texts, "")
    return Call(run, args, pa.string(), site.sql)


function("||", min_args=2, max_args=2, operator=True)(_concat)
function("CONCAT", min_args=1, max_args=None)(_concat)


@function("CONCAT_WS", min_args=1, max_args=None)
def _concat_ws(args, site):
    """Join the non-NULL arguments with the separator; NULL separator → NULL; all arguments NULL → ''."""
    require(args[0], ("string",), "CONCAT_WS separator")

    def run(env, xs):
        sep = as_string(xs[0])
        acc = pa.nulls(env.num_rows, pa.string())
        # Not binary_join_element_wise(null_handling="skip"): pyarrow 19 drops rows whose inputs are all NULL.
        for x in xs[1:]:
            text = java_to_string(x, env.zone)
            joined = pc.binary_join_element_wise(acc, text, sep)
            acc = pc.if_else(pc.is_null(text), acc, pc.if_else(pc.is_null(acc), text, joined))
        acc = pc.fill_null(acc, "")
        return pc.if_else(pc.is_null(sep), pa.scalar(None, pa.string()), acc)
    return Call(run, args, pa.string(), site.sql)


# ---------------------------------------------------------------------------------------- case and length

# Characters whose Java (full) case mapping differs from Arrow's simple one: 'ß' → 'SS', 'ŉ' → 'ʼN', ligatures …;
# and for lower case 'İ' → 'i̇' and the final sigma rule. Rows holding one take Python's str methods, which
# implement the same Unicode SpecialCasing rules as Java.
_LOWER_RE = "[\u0130\u03a3]"


@functools.cache
def _upper_re() -> str:
    # built at first use, not at import: scanning the 65,536 code points is a tenth of a second of every start-up
    # (the fixed cost of a run, docs/benchmarks.md)
    special = "".join(c for c in map(chr, range(0x80, 0x10000)) if len(c.upper()) > 1)
    return "[" + re.escape(special) + "]"


def _cased(kernel, special_re: Callable[[], str], py_method: str):
    def run(env, xs):
        s = as_string(xs[0])
        out = kernel(s)
        if pc.all(pc.fill_null(pc.string_is_ascii(s), True)).as_py():
            return out
        special = pc.fill_null(pc.match_substring_regex(s, special_re()), False)
        if pc.any(special).as_py():
            values = [getattr(v, py_method)() for v in s.filter(special).to_pylist()]
            out = scatter(out, special, values)
        return out
    return run


def _string_fn(name: str, run):
    def build(args, site):
        _strings(args, name)
        if is_null_literal(args[0]):
            return null_of(pa.string(), site)
        return Call(run, args, pa.string(), site.sql)
    return build


function("UPPER")(_string_fn("UPPER", _cased(pc.utf8_upper, _upper_re, "upper")))
function("LOWER")(_string_fn("LOWER", _cased(pc.utf8_lower, lambda: _LOWER_RE, "lower")))


@function("CHAR_LENGTH", "CHARACTER_LENGTH")
def _char_length(args, site):
    """String.length(): UTF-16 code units (a character outside the BMP counts 2)."""
    _strings(args, "CHAR_LENGTH")

    def run(env, xs):
        s = as_string(xs[0])
        length = pc.utf8_length(s)
        if not pc.all(pc.fill_null(pc.string_is_ascii(s), True)).as_py():
            length = pc.add(length, pc.count_substring_regex(s, "[\U00010000-\U0010FFFF]"))
        return length.cast(pa.int32())
    return Call(run, args, pa.int32(), site.sql)


# ------------------------------------------------------------------------------------------------- trimming

_JAVA_WHITESPACE = "".join(chr(i) for i in range(33))


@function("TRIM")
def _trim(args, site):
    """``TRIM(s)``: Java's String.trim() (every character up to U+0020 at both ends)."""
    _strings(args, "TRIM")
    return Call(lambda env, xs: pc.utf8_trim(as_string(xs[0]), characters=_JAVA_WHITESPACE), args, pa.string(),
                site.sql)


_TRIM_KERNELS = {"LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim, "BOTH": pc.utf8_trim}


def trim_chars(side: str, args: list[Node], site) -> Node:
    """SQL ``TRIM(side chars FROM s)`` and LTRIM/RTRIM/BTRIM(s, chars): remove the characters of ``chars``."""
    kernel = _TRIM_KERNELS[side]

    def run(env, xs, values):
        chars = values[0]
        s = as_string(xs[0])
        return s if chars == "" else kernel(s, characters=chars)
    return with_scalars(args, (1,), run, pa.string(), site)


def _side_trim(name: str, side: str):
    def build(args, site):
        _strings(args, name)
        if len(args) == 1:
            args = [args[0], Literal(" ", pa.string(), "' '")]
        return trim_chars(side, args, site)
    return build


function("LTRIM", min_args=1, max_args=2)(_side_trim("LTRIM", "LEADING"))
function("RTRIM", min_args=1, max_args=2)(_side_trim("RTRIM", "TRAILING"))
function("BTRIM", min_args=1, max_args=2)(_side_trim("BTRIM", "BOTH"))


# -------------------------------------------------------------------------------------------- substrings

def _slice(s: pa.Array, start: int, stop: int) -> pa.Array:
    return pc.utf8_slice_codeunits(s, start=start, stop=stop)


@function("SUBSTR", "SUBSTRING", min_args=2, max_args=3)
def _substr(args, site):
    """1-based; position 0 is 1; a negative position counts from the end (before the start → ''); past the end →
    ''; a negative length fails the batch (as it fails Flink CDC's job)."""
    require(args[0], ("string",), "SUBSTR")
    _ints(args[1:], "SUBSTR position/length")
    if len(args) > 2 and args[2].is_const and args[2].const is not None and int(args[2].const) < 0:
        raise ExpressionError(f"SUBSTR length must be >= 0, got {args[2].const}")

    def run(env, xs, values):
        pos = int(values[0])
        length = int(values[1]) if len(values) > 1 else _BIG
        s = as_string(xs[0])
        if length < 0:
            if pc.any(pc.is_valid(s)).as_py():
                raise data_error(site, "substring length must be >= 0", length)
            return pa.nulls(len(s), pa.string())
        if pos > 0:
            return _slice(s, pos - 1, min(pos - 1 + length, _BIG))
        if pos == 0:
            return _slice(s, 0, min(length, _BIG))
        stop = pos + length
        out = _slice(s, pos, _BIG if stop >= 0 else stop)
        before_start = pc.less(pc.utf8_length(s), -pos)
        return pc.if_else(before_start, "", out)
    return with_scalars(args, tuple(range(1, len(args))), run, pa.string(), site)


def _left(args, site):
    require(args[0], ("string",), "LEFT")
    require(args[1], ("numeric",), "LEFT length")
    return with_scalars(args, (1,), lambda env, xs, v: _slice(as_string(xs[0]), 0, max(int(v[0]), 0)),
                        pa.string(), site)


def _right(args, site):
    require(args[0], ("string",), "RIGHT")
    require(args[1], ("numeric",), "RIGHT length")

    def run(env, xs, values):
        n = int(values[0])
        s = as_string(xs[0])
        if n <= 0:
            return pc.if_else(pc.is_valid(s), "", pa.scalar(None, pa.string()))
        return _slice(s, -n, _BIG)
    return with_scalars(args, (1,), run, pa.string(), site)


function("LEFT", min_args=2, max_args=2)(_left)
function("RIGHT", min_args=2, max_args=2)(_right)


def _text_or_bytes(args: list[Node], what: str) -> bool:
    """Both operands STRING, or both BINARY (Flink CDC has both overloads); True for BINARY."""
    for a in args:
        require(a, ("string", "binary"), what)
    families = {fam(a) for a in args} - {"null"}
    if len(families) > 1:
        raise ExpressionError(f"{what} takes two STRING or two BINARY operands, got "
                              f"{' and '.join(sorted(f.upper() for f in families))}")
    return families == {"binary"}


def _operand(arr: pa.Array, binary: bool) -> pa.Array:
    if binary:
        return pa.nulls(len(arr), pa.binary()) if pa.types.is_null(arr.type) else arr.cast(pa.binary())
    return as_string(arr)


def _cut(s: pa.Array, start: int, stop: int, binary: bool) -> pa.Array:
    return pc.binary_slice(s, start, min(stop, 2 ** 31 - 1)) if binary else _slice(s, start, stop)


def _length(s: pa.Array, binary: bool) -> pa.Array:
    return pc.binary_length(s) if binary else pc.utf8_length(s)


@function("OVERLAY", min_args=3, max_args=4)
def _overlay(args, site):
    """``OVERLAY(s PLACING r FROM p [FOR n])`` on STRING or BINARY, as Flink CDC's overlay(): n defaults to the
    length of r; p < 1 or p past the end leaves s unchanged; the rest of s after p - 1 + n is kept only when
    n > 0 and it lies inside s (so FOR 0 drops the tail, as Flink CDC's code does)."""
    binary = _text_or_bytes(args[:2], "OVERLAY")
    _ints(args[2:], "OVERLAY position/length")
    has_length = len(args) > 3
    out = pa.binary() if binary else pa.string()

    def run(env, xs):
        s, r, p = _operand(xs[0], binary), _operand(xs[1], binary), xs[2]
        n = xs[3] if has_length else _length(r, binary)

        def kernel(sub_env, sub, values):
            pos, count = values
            ss, rr = sub
            if pos is None or count is None:
                return pa.nulls(len(ss), out)
            pos, count = int(pos), int(count)
            if pos < 1:
                return ss
            size = _length(ss, binary)
            left = _cut(ss, 0, pos - 1, binary)
            right = _cut(ss, pos - 1 + count, _BIG, binary) if count > 0 else _cut(ss, 0, 0, binary)
            keep_tail = pc.less_equal(pa.scalar(pos + count - 1, pa.int64()), size.cast(pa.int64())) \
                if binary else pc.less_equal(pa.scalar(pos + count, pa.int64()), size.cast(pa.int64()))
            right = pc.if_else(keep_tail, right, _cut(ss, 0, 0, binary))
            joined = pc.binary_join_element_wise(left, rr, right, b"" if binary else "")
            return pc.if_else(pc.greater(size, pos - 1), joined, ss)

        return grouped(env, [p.cast(pa.int64()), n.cast(pa.int64())], [s, r], kernel, out)
    call = Call(run, args, out, site.sql)
    if binary:  # Calcite: DYADIC_STRING_SUM_PRECISION_NULLABLE_VARYING, VARBINARY(len(s) + len(r)), capped
        lengths = [binary_of(a.dtype, a.decl)[1] for a in args[:2]]
        call.decl = f"VARBINARY({min(sum(lengths), MAX_BINARY_LENGTH)})"
    return call


def _position(needle: Node, haystack: Node, start: Node | None, site) -> Node:
    """Flink CDC's position(): the 1-based position (characters, or bytes for BINARY) of the first ``needle`` in
    ``haystack`` at or after ``start`` (a start below 1 searches from the beginning); 0 if absent or if start
    is past the end; an empty needle is found at 1."""
    binary = _text_or_bytes([needle, haystack], "POSITION")
    args = [haystack, needle] + ([start] if start is not None else [])

    def run(env, xs, values):
        text = values[0]
        begin = max(int(values[1]) if len(values) > 1 else 1, 1)
        s = _operand(xs[0], binary)
        length = _length(s, binary)
        if len(text) == 0:
            return where_null(pc.is_null(s), pa.repeat(pa.scalar(1, pa.int32()), len(s)))
        tail = _cut(s, begin - 1, _BIG, binary)
        if binary:
            index = pc.find_substring(tail, pattern=text)
            found = pc.if_else(pc.less(index, 0), 0, pc.add(index, begin))
        else:
            regex = "(?s)^(.*?)" + re.escape(text)
            hit = pc.fill_null(pc.match_substring_regex(tail, regex), False)
            prefix = pc.replace_substring_regex(tail, regex + "(?s:.*)$", r"\1")
            found = pc.if_else(hit, pc.add(pc.utf8_length(prefix), begin), 0)
        out_of_range = pc.greater(pa.scalar(begin - 1, pa.int64()), length.cast(pa.int64()))
        result = pc.if_else(out_of_range, 0, found)
        return where_null(pc.is_null(s), result.cast(pa.int32()))
    return with_scalars(args, tuple(range(1, len(args))), run, pa.int32(), site)


@function("POSITION", min_args=2, max_args=3)
def _position_fn(args, site):
    return _position(args[0], args[1], args[2] if len(args) > 2 else None, site)


@function("LOCATE", min_args=2, max_args=3)
def _locate(args, site):
    return _position(args[0], args[1], args[2] if len(args) > 2 else None, site)


@function("INSTR", min_args=2, max_args=2)
def _instr(args, site):
    return _position(args[1], args[0], None, site)


# ----------------------------------------------------------------------------------------------- padding

def _pad(name: str, left: bool):
    def build(args, site):
        require(args[0], ("string",), name)
        require(args[1], ("numeric",), f"{name} length")
        require(args[2], ("string",), f"{name} padding")

        def run(env, xs, values):
            n, pad = int(values[0]), values[1]
            s = as_string(xs[0])
            if n < 0 or pad == "":
                return pa.nulls(len(s), pa.string())
            truncated = _slice(s, 0, n)
            if len(pad) == 1:
                padded = (pc.utf8_lpad if left else pc.utf8_rpad)(s, width=n, padding=pad)
                return pc.if_else(pc.greater_equal(pc.utf8_length(s), n), truncated, padded)
            full = (pad * (n // len(pad) + 1))[:n]
            if not left:
                return _slice(pc.binary_join_element_wise(s, full, ""), 0, n)
            lengths = pc.utf8_length(s)

            def by_length(sub_env, sub, lens):
                k = n - int(lens[0]) if lens[0] is not None else 0
                return pc.binary_join_element_wise(full[:max(k, 0)], sub[0], "")

            short = pc.fill_null(pc.less(lengths, n), False)
            padded = grouped(env, [pc.if_else(short, lengths, n)], [s], by_length, pa.string())
            return pc.if_else(short, padded, truncated)
        return with_scalars(args, (1, 2), run, pa.string(), site)
    return build


function("LPAD", min_args=3, max_args=3)(_pad("LPAD", True))
function("RPAD", min_args=3, max_args=3)(_pad("RPAD", False))


# -------------------------------------------------------------------------------------- replace / repeat

@function("REPLACE", min_args=3, max_args=3)
def _replace(args, site):
    """Literal replace-all (Java String.replace: an empty search text inserts the replacement everywhere)."""
    _strings(args, "REPLACE")

    def run(env, xs, values):
        old, new = values
        s = as_string(xs[0])
        if old == "":
            return pc.replace_substring_regex(s, "", new.replace("\\", "\\\\"))
        return pc.replace_substring(s, pattern=old, replacement=new)
    return with_scalars(args, (1, 2), run, pa.string(), site)


@function("REPEAT", min_args=2, max_args=2)
def _repeat(args, site):
    require(args[0], ("string",), "REPEAT")
    require(args[1], ("numeric",), "REPEAT count")

    def run(env, xs):
        s, n = as_string(xs[0]), xs[1]
        if pa.types.is_null(n.type):
            return pa.nulls(len(s), pa.string())
        count = pc.max_element_wise(n.cast(pa.int64()), 0, skip_nulls=False)
        return where_null(pc.is_null(count), pc.binary_repeat(s, pc.fill_null(count, 0)))
    return Call(run, args, pa.string(), site.sql)


def _affix(name: str, kernel):
    def build(args, site):
        for a in args:
            require(a, ("string", "binary"), name)

        def run(env, xs, values):
            return kernel(xs[0], pattern=values[0]) if values[0] != "" and values[0] != b"" else \
                pc.is_valid(xs[0])
        return with_scalars(args, (1,), run, pa.bool_(), site)
    return build


function("STARTSWITH", min_args=2, max_args=2)(_affix("STARTSWITH", pc.starts_with))
function("ENDSWITH", min_args=2, max_args=2)(_affix("ENDSWITH", pc.ends_with))


# ------------------------------------------------------------------------------------------------- base64

_ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)
_DECODE = np.full(256, 255, dtype=np.uint8)
_DECODE[_ALPHABET] = np.arange(64, dtype=np.uint8)


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data) of a binary array, starting at 0."""
    arr = pa.concat_arrays([arr.cast(pa.binary())])  # a fresh array: offsets start at the data buffer
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data_buffer = arr.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return offsets, data


def _gather(offsets: np.ndarray, data: np.ndarray, new_lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Copy each row's bytes into rows of ``new_lengths`` (zero padded); returns (new offsets, new data)."""
    lengths = np.diff(offsets)
    new_offsets = np.concatenate([[0], np.cumsum(new_lengths)]).astype(np.int64)
    out = np.zeros(int(new_offsets[-1]), dtype=np.uint8)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    within = np.arange(int(lengths.sum())) - np.repeat(offsets[:-1] - offsets[0], lengths)
    out[new_offsets[:-1][rows] + within] = data[offsets[0]:offsets[-1]]
    return new_offsets, out


def base64_encode(arr: pa.Array) -> pa.Array:
    """Standard base64 with padding, vectorised with numpy (Arrow has no base64 kernel)."""
    offsets, data = _binary_parts(arr)
    lengths = np.diff(offsets)
    padded = (lengths + 2) // 3 * 3
    _, buf = _gather(offsets, data, padded)
    triples = buf.reshape(-1, 3).astype(np.uint32)
    word = (triples[:, 0] << 16) | (triples[:, 1] << 8) | triples[:, 2]
    sextets = np.stack([(word >> 18) & 63, (word >> 12) & 63, (word >> 6) & 63, word & 63], axis=1)
    chars = _ALPHABET[sextets].reshape(-1)
    out_offsets = np.concatenate([[0], np.cumsum(padded // 3 * 4)]).astype(np.int64)
    rest = lengths % 3
    ends = out_offsets[1:]
    chars[ends[rest == 1] - 1] = ord("=")
    chars[ends[rest == 1] - 2] = ord("=")
    chars[ends[rest == 2] - 1] = ord("=")
    validity = arr.is_valid()
    out = pa.Array.from_buffers(pa.large_string(), len(arr), [None, pa.py_buffer(out_offsets.tobytes()),
                                                              pa.py_buffer(chars.tobytes())])
    return where_null(pc.invert(validity), out.cast(pa.string()))


_BASE64_RE = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$"


def base64_decode(text: pa.Array) -> pa.Array:
    """Decode base64 text to bytes (padding optional, as java.util.Base64's decoder); invalid text → NULL."""
    text = as_string(text)
    valid = pc.fill_null(pc.match_substring_regex(text, _BASE64_RE), False)
    clean = pc.if_else(valid, pc.replace_substring(text, "=", ""), "")
    offsets, data = _binary_parts(clean.cast(pa.binary()))
    lengths = np.diff(offsets)
    full = (lengths + 3) // 4 * 4
    _, buf = _gather(offsets, data, full)
    values = _DECODE[buf].astype(np.uint32)
    values[values == 255] = 0  # the zero padding added by _gather
    quads = values.reshape(-1, 4)
    word = (quads[:, 0] << 18) | (quads[:, 1] << 12) | (quads[:, 2] << 6) | quads[:, 3]
    decoded = np.stack([(word >> 16) & 255, (word >> 8) & 255, word & 255], axis=1).astype(np.uint8).reshape(-1)
    out_lengths = lengths // 4 * 3 + np.where(lengths % 4 == 0, 0, lengths % 4 - 1)
    starts = np.concatenate([[0], np.cumsum(full // 4 * 3)])[:-1]
    picked_offsets = np.concatenate([[0], np.cumsum(out_lengths)]).astype(np.int64)
    rows = np.repeat(np.arange(len(lengths)), out_lengths)
    within = np.arange(int(out_lengths.sum())) - np.repeat(picked_offsets[:-1], out_lengths)
    payload = decoded[starts[rows] + within] if len(rows) else np.zeros(0, np.uint8)
    out = pa.Array.from_buffers(pa.large_binary(), len(text), [None, pa.py_buffer(picked_offsets.tobytes()),
                                                               pa.py_buffer(payload.tobytes())])
    return where_null(pc.invert(valid), out.cast(pa.binary()))


@function("TO_BASE64")
def _to_base64(args, site):
    require(args[0], ("string", "binary"), "TO_BASE64")
    return Call(lambda env, xs: base64_encode(xs[0] if fam(args[0]) == "binary" else as_string(xs[0])), args,
                pa.string(), site.sql)


@function("FROM_BASE64")
def _from_base64(args, site):
    """Decoded bytes as UTF-8 text (malformed sequences become U+FFFD); invalid base64 → NULL."""
    require(args[0], ("string",), "FROM_BASE64")
    return Call(lambda env, xs: utf8_decode(base64_decode(xs[0])), args, pa.string(), site.sql)


@function("FROM_BASE64_BINARY")
def _from_base64_binary(args, site):
    require(args[0], ("string",), "FROM_BASE64_BINARY")
    return Call(lambda env, xs: base64_decode(xs[0]), args, pa.binary(), site.sql)

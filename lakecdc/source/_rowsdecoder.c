/* Binlog rows-event decoder: walks the row images of one Write/Update/Delete rows event once and writes every value
 * straight into per-column buffers in the Arrow layout of the column's target type (validity, offsets, fixed-width
 * values), so Python never sees a per-row or per-value object.
 *
 * Python side: lakecdc/source/rows_decoder.py. It builds a Plan per (table map, SourceTable): for each column of
 * the event how to read it (fixed size or length prefix) and how to convert it (kind), and for each output slot
 * (SourceTable column) its layout. Plan.decode() turns one event body into a Rows object (output rows in binlog
 * order: an UPDATE pair gives two rows, and an op code per row); concat() merges the Rows of many events into
 * the final buffers, which Python wraps with pyarrow.Array.from_buffers.
 *
 * Anything this decoder cannot reproduce exactly like python-mysql-replication + lakecdc's codecs (invalid UTF-8,
 * an invalid date the library refuses, an out-of-range value, a truncated event ...) raises
 * _rowsdecoder.Unsupported; the caller then decodes that event with the library, so the outcome (value or error)
 * stays the library's.
 *
 * The snapshot's text-protocol row scanner is its own extension (_textrows.c); both share _buffers.h.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef __int128 i128;

/* ---- conversion kinds (how to turn the bytes of one value into the slot's value) ---- */
enum {
    K_SKIP = 0,     /* not captured: read past it */
    K_INT = 1,      /* little-endian integer of `fixed` bytes, signed unless `flags & F_UNSIGNED` */
    K_YEAR = 2,     /* 1 byte: 0 -> 0, else 1900 + v */
    K_FLOAT = 3,    /* IEEE float32 */
    K_DOUBLE = 4,   /* IEEE float64 */
    K_DECIMAL = 5,  /* MySQL binary decimal (prec, scale) */
    K_DATE = 6,     /* 3 bytes */
    K_DATETIME2 = 7,
    K_TIMESTAMP2 = 8,
    K_TIME2 = 9,
    K_UTF8 = 10,    /* length-prefixed UTF-8 text, validated like Python's strict decoder */
    K_TABLE = 11,   /* length-prefixed text in a single-byte character set, translated by a 256-entry table */
    K_RAW = 12,     /* length-prefixed bytes, copied */
    K_PAD = 13,     /* length-prefixed bytes, right-padded with 0x00 to the slot width (BINARY(n)) */
    K_ENUM = 14,    /* index of `fixed` bytes into labels (labels[0] is '') */
    K_SET = 15,     /* bit mask of `fixed` bytes over labels */
    K_BIT = 16,     /* `fixed` big-endian bytes, first byte masked with bit_mask */
    K_NULL = 17,    /* read past it, the value is NULL (ENUM without labels in the table map) */
};

/* ---- slot (output column) types ---- */
enum {
    TG_BOOL = 1, TG_I8, TG_I16, TG_I32, TG_I64, TG_DEC128, TG_F32, TG_F64,
    TG_DATE32, TG_TS, TG_TIME32, TG_TIME64, TG_VAR, TG_FSB, TG_LIST,
};

#define F_UNSIGNED 1
#define TIME_LIMIT_US ((int64_t)2147483648LL * 1000)

static PyObject *Unsupported;

#include "_buffers.h"

/* ------------------------------------------------------------------------------------------------ plan */

typedef struct {
    int tgt;      /* TG_* */
    int width;    /* bytes per value for fixed layouts */
    int is_pk;
    int is_float; /* compare as float (−0.0 == 0.0) */
} SlotSpec;

typedef struct {
    int fixed;    /* value size in bytes; 0: length-prefixed */
    int lenb;     /* length prefix bytes (1..4) when fixed == 0 */
    int kind;
    int slot;     /* -1: not captured */
    int flags;
    int fsp;
    int prec, scale;
    int bit_mask;
    int zero_null;   /* zero / invalid DATE, DATETIME: 1 = NULL, 0 = the epoch */
    int64_t divisor; /* microseconds per unit of the slot (time and timestamp slots) */
    int nlabels;
    const char **label_ptr;
    Py_ssize_t *label_len;
    uint8_t *table;  /* K_TABLE: 256 entries of [len, b0, b1, b2, b3]; len 0xFF = not decodable */
} ColSpec;

typedef struct {
    PyObject_HEAD
    int nslots;
    SlotSpec *slots;
    int ncols;
    ColSpec *cols;
    int *missing;  /* slots no event column fills */
    int nmissing;
    PyObject *keep; /* the label bytes objects, kept alive */
} PlanObject;

/* one output slot of a Rows object */
typedef struct {
    Buf valid;  /* one byte per row (packed to bits by concat) */
    Buf data;   /* fixed: width bytes per row; bool: 1 byte per row; var: bytes; list: int32 label indices */
    Buf offs;   /* var / list: int32 offset per row + 1 */
} SlotBuf;

typedef struct {
    PyObject_HEAD
    PlanObject *plan;
    int nslots;
    SlotBuf *sb;
    Buf ops;          /* int8 op code per row: 0 +I, 1 -U, 2 +U, 3 -D */
    Py_ssize_t nrows; /* output rows */
    Py_ssize_t event_rows; /* rows of the event (an UPDATE pair counts once) */
} RowsObject;

static PyTypeObject PlanType;
static PyTypeObject RowsType;

/* ------------------------------------------------------------------------------------------------ helpers */


static inline uint64_t be_uint(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* signed big-endian integer of n bytes (python-mysql-replication's read_int_be_by_size) */
static inline int64_t be_int(const uint8_t *p, int n) {
    uint64_t v = be_uint(p, n);
    if (n < 8 && (v >> (8 * n - 1)) & 1)
        return (int64_t)v - ((int64_t)1 << (8 * n));
    return (int64_t)v;
}

static int is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int64_t y, int m) {
    static const int dim[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : dim[m];
}

static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static inline int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    return q;
}

/* python-mysql-replication's __read_fsp: signed big-endian, odd precisions divided by 10 (truncating) */
static int64_t read_fsp(const uint8_t *p, int fsp) {
    int n = (fsp + 1) / 2;
    if (n == 0)
        return 0;
    int64_t v = be_int(p, n);
    if (fsp % 2)
        v = v / 10; /* int(v / 10): truncation toward zero */
    static const int64_t pow10[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};
    return v * pow10[6 - fsp];
}

static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c < 0xC2) {
            return 0;
        } else if (c < 0xE0) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c < 0xF0) {
            if (i + 2 >= n)
                return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80)
                return 0;
            if (c == 0xE0 && c1 < 0xA0)
                return 0; /* overlong */
            if (c == 0xED && c1 >= 0xA0)
                return 0; /* surrogate */
            i += 3;
        } else if (c < 0xF5) {
            if (i + 3 >= n)
                return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && c1 < 0x90)
                return 0;
            if (c == 0xF4 && c1 >= 0x90)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------------ decoding */

typedef struct {
    const char *msg; /* set on a decode failure (Unsupported) */
    int col;
    int oom;
} Err;

static inline int fail(Err *e, int col, const char *msg) {
    e->msg = msg;
    e->col = col;
    return -1;
}

static inline int oom(Err *e) {
    e->oom = 1;
    return -1;
}

static int put_null(SlotBuf *s, const SlotSpec *spec, Err *e) {
    uint8_t zero = 0;
    if (buf_put(&s->valid, &zero, 1))
        return oom(e);
    switch (spec->tgt) {
    case TG_BOOL:
        if (buf_put(&s->data, &zero, 1))
            return oom(e);
        break;
    case TG_VAR:
    case TG_LIST: {
        int32_t last;
        memcpy(&last, s->offs.data + s->offs.len - 4, 4);
        if (buf_put_i32(&s->offs, last))
            return oom(e);
        break;
    }
    default:
        if (buf_zero(&s->data, spec->width))
            return oom(e);
    }
    return 0;
}

static inline int put_valid(SlotBuf *s, Err *e) {
    uint8_t one = 1;
    if (buf_put(&s->valid, &one, 1))
        return oom(e);
    return 0;
}

static int put_int(SlotBuf *s, const SlotSpec *spec, i128 v, int col, Err *e) {
    int8_t v8;
    int16_t v16;
    int32_t v32;
    int64_t v64;
    uint8_t b;
    switch (spec->tgt) {
    case TG_BOOL:
        b = v != 0;
        if (buf_put(&s->data, &b, 1))
            return oom(e);
        break;
    case TG_I8:
        if (v < INT8_MIN || v > INT8_MAX)
            return fail(e, col, "integer out of range of the column's Arrow type");
        v8 = (int8_t)v;
        if (buf_put(&s->data, &v8, 1))
            return oom(e);
        break;
    case TG_I16:
        if (v < INT16_MIN || v > INT16_MAX)
            return fail(e, col, "integer out of range of the column's Arrow type");
        v16 = (int16_t)v;
        if (buf_put(&s->data, &v16, 2))
            return oom(e);
        break;
    case TG_I32:
        if (v < INT32_MIN || v > INT32_MAX)
            return fail(e, col, "integer out of range of the column's Arrow type");
        v32 = (int32_t)v;
        if (buf_put(&s->data, &v32, 4))
            return oom(e);
        break;
    case TG_I64:
        if (v < INT64_MIN || v > INT64_MAX)
            return fail(e, col, "integer out of range of the column's Arrow type");
        v64 = (int64_t)v;
        if (buf_put(&s->data, &v64, 8))
            return oom(e);
        break;
    case TG_DEC128:
        if (buf_put(&s->data, &v, 16))
            return oom(e);
        break;
    default:
        return fail(e, col, "internal: integer into a non-integer slot");
    }
    return put_valid(s, e);
}

static const int dig2bytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

static int decimal_size(int prec, int scale) {
    int intg = prec - scale;
    return (intg / 9) * 4 + dig2bytes[intg % 9] + (scale / 9) * 4 + dig2bytes[scale % 9];
}

/* Decimal as an unscaled int128 (prec <= 38) or as plain text ("-123.4500"), like format(Decimal(...), "f"). */
static int put_decimal(SlotBuf *s, const SlotSpec *spec, const ColSpec *c, const uint8_t *p, int col, Err *e) {
    int size = c->fixed;
    uint8_t tmp[64];
    if (size > (int)sizeof tmp)
        return fail(e, col, "decimal too large");
    memcpy(tmp, p, size);
    int neg = !(tmp[0] & 0x80);
    tmp[0] ^= 0x80;
    if (neg)
        for (int i = 0; i < size; i++)
            tmp[i] ^= 0xFF;
    int intg = c->prec - c->scale, scale = c->scale;
    int intg0 = intg / 9, intg0x = intg % 9, frac0 = scale / 9, frac0x = scale % 9;
    /* digit groups, most significant first, with how many digits each holds */
    uint32_t groups[16];
    int gdig[16], ng = 0, pos = 0;
    if (dig2bytes[intg0x]) {
        groups[ng] = (uint32_t)be_uint(tmp + pos, dig2bytes[intg0x]);
        gdig[ng++] = intg0x;
        pos += dig2bytes[intg0x];
    }
    for (int i = 0; i < intg0; i++) {
        groups[ng] = (uint32_t)be_uint(tmp + pos, 4);
        gdig[ng++] = 9;
        pos += 4;
    }
    int int_groups = ng;
    for (int i = 0; i < frac0; i++) {
        groups[ng] = (uint32_t)be_uint(tmp + pos, 4);
        gdig[ng++] = 9;
        pos += 4;
    }
    if (dig2bytes[frac0x]) {
        groups[ng] = (uint32_t)be_uint(tmp + pos, dig2bytes[frac0x]);
        gdig[ng++] = frac0x;
        pos += dig2bytes[frac0x];
    }
    for (int i = 0; i < ng; i++) {
        static const uint32_t lim[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
                                         1000000000};
        if (groups[i] >= lim[gdig[i]])
            return fail(e, col, "corrupt decimal digits");
    }
    if (spec->tgt == TG_DEC128) {
        if (c->prec > 38)
            return fail(e, col, "decimal precision above 38 into decimal128");
        i128 v = 0;
        for (int i = 0; i < ng; i++) {
            i128 m = 1;
            for (int k = 0; k < gdig[i]; k++)
                m *= 10;
            v = v * m + groups[i];
        }
        if (neg)
            v = -v;
        if (buf_put(&s->data, &v, 16))
            return oom(e);
        return put_valid(s, e);
    }
    /* text */
    char text[160];
    int n = 0;
    if (neg)
        text[n++] = '-';
    char digits[160];
    int nd = 0;
    for (int i = 0; i < int_groups; i++)
        nd += sprintf(digits + nd, "%0*u", gdig[i], groups[i]);
    int k = 0;
    while (k < nd && digits[k] == '0')
        k++;
    if (k == nd)
        text[n++] = '0';
    else {
        memcpy(text + n, digits + k, nd - k);
        n += nd - k;
    }
    if (scale > 0) {
        text[n++] = '.';
        for (int i = int_groups; i < ng; i++)
            n += sprintf(text + n, "%0*u", gdig[i], groups[i]);
    }
    if (buf_put(&s->data, text, n))
        return oom(e);
    if (buf_put_i32(&s->offs, (int32_t)s->data.len))
        return oom(e);
    return put_valid(s, e);
}

static int put_bytes(SlotBuf *s, const uint8_t *v, size_t n, Err *e) {
    if (s->data.len + n > (size_t)INT32_MAX)
        return oom(e);
    if (buf_put(&s->data, v, n) || buf_put_i32(&s->offs, (int32_t)s->data.len))
        return oom(e);
    return put_valid(s, e);
}

static int put_fixed(SlotBuf *s, const void *v, int n, Err *e) {
    if (buf_put(&s->data, v, n))
        return oom(e);
    return put_valid(s, e);
}

/* the epoch (0) or NULL for a zero / invalid date */
static int put_zero_date(SlotBuf *s, const SlotSpec *spec, const ColSpec *c, Err *e) {
    if (c->zero_null)
        return put_null(s, spec, e);
    if (buf_zero(&s->data, spec->width))
        return oom(e);
    return put_valid(s, e);
}

static int put_micros(SlotBuf *s, const SlotSpec *spec, const ColSpec *c, int64_t us, int col, Err *e) {
    if (us % c->divisor != 0)
        return fail(e, col, "fraction finer than the column's unit");
    int64_t v = us / c->divisor;
    return put_fixed(s, &v, 8, e);
}

static int convert(const ColSpec *c, SlotBuf *s, const SlotSpec *spec, const uint8_t *v, size_t n, int col, Err *e) {
    switch (c->kind) {
    case K_INT: {
        i128 x;
        if (c->flags & F_UNSIGNED)
            x = (i128)le_uint(v, c->fixed);
        else {
            uint64_t u = le_uint(v, c->fixed);
            int bits = 8 * c->fixed;
            int64_t sv = bits < 64 && ((u >> (bits - 1)) & 1) ? (int64_t)(u - ((uint64_t)1 << bits)) : (int64_t)u;
            x = sv;
        }
        return put_int(s, spec, x, col, e);
    }
    case K_YEAR: {
        i128 x = v[0] ? 1900 + v[0] : 0;
        return put_int(s, spec, x, col, e);
    }
    case K_FLOAT: {
        float f;
        memcpy(&f, v, 4);
        if (spec->tgt == TG_F32)
            return put_fixed(s, &f, 4, e);
        double d = f;
        return put_fixed(s, &d, 8, e);
    }
    case K_DOUBLE:
        return put_fixed(s, v, 8, e);
    case K_DECIMAL:
        return put_decimal(s, spec, c, v, col, e);
    case K_DATE: {
        uint32_t t = (uint32_t)le_uint(v, 3);
        int64_t y = (t >> 9) & 0x7FFF;
        int m = (t >> 5) & 0xF, d = t & 0x1F;
        if (t == 0 || y == 0 || m == 0 || d == 0)
            return put_zero_date(s, spec, c, e);
        if (y > 9999 || m > 12 || d > days_in_month(y, m))
            return fail(e, col, "invalid DATE (the binlog library refuses it)");
        int32_t days = (int32_t)days_from_civil(y, m, d);
        return put_fixed(s, &days, 4, e);
    }
    case K_DATETIME2: {
        uint64_t data = be_uint(v, 5);
        int64_t ym = (data >> 22) & 0x1FFFF;
        int64_t y = ym / 13;
        int mo = (int)(ym % 13), d = (data >> 17) & 0x1F, h = (data >> 12) & 0x1F, mi = (data >> 6) & 0x3F,
            sec = data & 0x3F;
        if (y < 1 || y > 9999 || mo < 1 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 59)
            return put_zero_date(s, spec, c, e); /* the library: "out of datetime2 range" */
        int64_t micro = read_fsp(v + 5, c->fsp);
        if (micro > 999999)
            return fail(e, col, "invalid DATETIME fraction");
        if (micro < 0)
            micro = 0;
        int64_t us = ((days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) * 1000000) + micro;
        return put_micros(s, spec, c, us, col, e);
    }
    case K_TIMESTAMP2: {
        int64_t secs = be_int(v, 4);
        int64_t micro = read_fsp(v + 4, c->fsp);
        if (micro > 999999)
            return fail(e, col, "invalid TIMESTAMP fraction");
        if (micro < 0)
            micro = 0;
        return put_micros(s, spec, c, secs * 1000000 + micro, col, e);
    }
    case K_TIME2: {
        /* python-mysql-replication's __read_time2 step by step, then lakecdc's fix of its sign bug */
        int64_t d = be_int(v, 3);
        int sign = ((d >> 23) & 1) ? 1 : -1;
        if (sign == -1)
            d = -d;
        int64_t h = (d >> 12) & 0x3FF, mi = (d >> 6) & 0x3F, sec = d & 0x3F;
        int64_t micro = read_fsp(v + 3, c->fsp);
        int64_t us = sign * ((h * 3600 + mi * 60 + sec) * 1000000 + micro);
        if (us < 0) {
            int64_t mag = -us, frac = mag % 1000000;
            if (frac)
                mag = mag - frac + (1000000 - frac);
            us = -mag;
        }
        if (us <= -TIME_LIMIT_US || us >= TIME_LIMIT_US)
            return fail(e, col, "TIME beyond the range of Paimon's TIME");
        int64_t q = floor_div(us, c->divisor);
        if (spec->tgt == TG_TIME32) {
            int32_t q32 = (int32_t)q;
            return put_fixed(s, &q32, 4, e);
        }
        return put_fixed(s, &q, 8, e);
    }
    case K_UTF8:
        if (!utf8_valid(v, n))
            return fail(e, col, "invalid UTF-8");
        return put_bytes(s, v, n, e);
    case K_TABLE: {
        if (buf_reserve(&s->data, n * 4))
            return oom(e);
        uint8_t *out = s->data.data + s->data.len;
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
            const uint8_t *entry = c->table + 5 * v[i];
            if (entry[0] == 0xFF)
                return fail(e, col, "byte not decodable in the column's character set");
            memcpy(out + w, entry + 1, entry[0]);
            w += entry[0];
        }
        if (s->data.len + w > (size_t)INT32_MAX)
            return oom(e);
        s->data.len += w;
        if (buf_put_i32(&s->offs, (int32_t)s->data.len))
            return oom(e);
        return put_valid(s, e);
    }
    case K_RAW:
        return put_bytes(s, v, n, e);
    case K_PAD:
        if (n > (size_t)spec->width)
            return fail(e, col, "value longer than BINARY(n)");
        if (buf_put(&s->data, v, n) || buf_zero(&s->data, spec->width - n))
            return oom(e);
        return put_valid(s, e);
    case K_ENUM: {
        uint64_t idx = le_uint(v, c->fixed);
        if (idx >= (uint64_t)c->nlabels)
            return fail(e, col, "ENUM index beyond the labels");
        return put_bytes(s, (const uint8_t *)c->label_ptr[idx], c->label_len[idx], e);
    }
    case K_SET: {
        uint64_t mask = le_uint(v, c->fixed);
        for (int i = 0; i < c->nlabels && i < 64; i++)
            if (mask & ((uint64_t)1 << i))
                if (buf_put_i32(&s->data, i))
                    return oom(e);
        if (buf_put_i32(&s->offs, (int32_t)(s->data.len / 4)))
            return oom(e);
        return put_valid(s, e);
    }
    case K_BIT: {
        uint8_t tmp[8];
        int nb = c->fixed;
        memcpy(tmp, v, nb);
        tmp[0] &= (uint8_t)c->bit_mask;
        if (spec->tgt == TG_BOOL) {
            uint8_t any = 0;
            for (int i = 0; i < nb; i++)
                any |= tmp[i];
            any = any != 0;
            return put_fixed(s, &any, 1, e);
        }
        int w = spec->width;
        if (w >= nb) {
            if (buf_zero(&s->data, w - nb) || buf_put(&s->data, tmp, nb))
                return oom(e);
        } else {
            for (int i = 0; i < nb - w; i++)
                if (tmp[i])
                    return fail(e, col, "BIT value wider than the column");
            if (buf_put(&s->data, tmp + (nb - w), w))
                return oom(e);
        }
        return put_valid(s, e);
    }
    case K_NULL:
        return put_null(s, spec, e);
    }
    return fail(e, col, "internal: unknown conversion");
}

static inline int bit_get(const uint8_t *bm, int i) { return (bm[i >> 3] >> (i & 7)) & 1; }

/* One row image at *pp: the null bitmap, then the present columns. */
static int decode_image(PlanObject *plan, RowsObject *rows, const uint8_t **pp, const uint8_t *end,
                        const uint8_t *present, int ncols, Err *e) {
    const uint8_t *p = *pp;
    int npresent = 0;
    for (int i = 0; i < ncols; i++)
        npresent += bit_get(present, i);
    const uint8_t *nulls = p;
    p += (npresent + 7) / 8;
    if (p > end)
        return fail(e, -1, "truncated row image");
    int ni = 0;
    for (int i = 0; i < ncols; i++) {
        const ColSpec *c = &plan->cols[i];
        SlotBuf *s = c->slot >= 0 ? &rows->sb[c->slot] : NULL;
        const SlotSpec *spec = c->slot >= 0 ? &plan->slots[c->slot] : NULL;
        if (!bit_get(present, i)) { /* binlog_row_image=MINIMAL: the column is not in this image */
            if (s && put_null(s, spec, e))
                return -1;
            continue;
        }
        int isnull = bit_get(nulls, ni++);
        if (isnull) {
            if (s && put_null(s, spec, e))
                return -1;
            continue;
        }
        const uint8_t *v;
        size_t n;
        if (c->fixed) {
            v = p;
            n = c->fixed;
        } else {
            if ((size_t)(end - p) < (size_t)c->lenb)
                return fail(e, i, "truncated row image");
            n = (size_t)le_uint(p, c->lenb);
            v = p + c->lenb;
        }
        if ((size_t)(end - v) < n)
            return fail(e, i, "truncated row image");
        p = v + n;
        if (!s)
            continue;
        if (convert(c, s, spec, v, n, i, e))
            return -1;
    }
    for (int k = 0; k < plan->nmissing; k++) {
        int sl = plan->missing[k];
        if (put_null(&rows->sb[sl], &plan->slots[sl], e))
            return -1;
    }
    *pp = p;
    return 0;
}

/* Are output rows a and b equal in slot sl (NULL equals NULL)? */
static int slot_rows_equal(const SlotSpec *spec, const SlotBuf *s, Py_ssize_t a, Py_ssize_t b) {
    uint8_t va = s->valid.data[a], vb = s->valid.data[b];
    if (!va || !vb)
        return va == vb;
    switch (spec->tgt) {
    case TG_BOOL:
        return s->data.data[a] == s->data.data[b];
    case TG_VAR:
    case TG_LIST: {
        int32_t oa0, oa1, ob0, ob1;
        memcpy(&oa0, s->offs.data + 4 * a, 4);
        memcpy(&oa1, s->offs.data + 4 * (a + 1), 4);
        memcpy(&ob0, s->offs.data + 4 * b, 4);
        memcpy(&ob1, s->offs.data + 4 * (b + 1), 4);
        int unit = spec->tgt == TG_LIST ? 4 : 1;
        if (oa1 - oa0 != ob1 - ob0)
            return 0;
        return memcmp(s->data.data + (size_t)oa0 * unit, s->data.data + (size_t)ob0 * unit,
                      (size_t)(oa1 - oa0) * unit) == 0;
    }
    default: {
        const uint8_t *pa = s->data.data + (size_t)a * spec->width, *pb = s->data.data + (size_t)b * spec->width;
        if (spec->is_float && spec->width == 4) {
            float fa, fb;
            memcpy(&fa, pa, 4);
            memcpy(&fb, pb, 4);
            return fa == fb;
        }
        if (spec->is_float && spec->width == 8) {
            double da, db;
            memcpy(&da, pa, 8);
            memcpy(&db, pb, 8);
            return da == db;
        }
        return memcmp(pa, pb, spec->width) == 0;
    }
    }
}

static void rows_truncate(RowsObject *r, Py_ssize_t nrows) {
    PlanObject *plan = r->plan;
    for (int i = 0; i < r->nslots; i++) {
        SlotBuf *s = &r->sb[i];
        const SlotSpec *spec = &plan->slots[i];
        s->valid.len = nrows;
        switch (spec->tgt) {
        case TG_BOOL:
            s->data.len = nrows;
            break;
        case TG_VAR:
        case TG_LIST: {
            int32_t last;
            memcpy(&last, s->offs.data + 4 * nrows, 4);
            s->offs.len = 4 * (nrows + 1);
            s->data.len = (size_t)last * (spec->tgt == TG_LIST ? 4 : 1);
            break;
        }
        default:
            s->data.len = (size_t)nrows * spec->width;
        }
    }
    r->ops.len = nrows;
    r->nrows = nrows;
}

static RowsObject *rows_new(PlanObject *plan) {
    RowsObject *r = PyObject_New(RowsObject, &RowsType);
    if (!r)
        return NULL;
    Py_INCREF(plan);
    r->plan = plan;
    r->nslots = plan->nslots;
    r->sb = (SlotBuf *)calloc(plan->nslots ? plan->nslots : 1, sizeof(SlotBuf));
    memset(&r->ops, 0, sizeof r->ops);
    r->nrows = 0;
    r->event_rows = 0;
    if (!r->sb) {
        Py_DECREF(r);
        PyErr_NoMemory();
        return NULL;
    }
    for (int i = 0; i < plan->nslots; i++) {
        int tgt = plan->slots[i].tgt;
        if (tgt == TG_VAR || tgt == TG_LIST) {
            if (buf_put_i32(&r->sb[i].offs, 0)) {
                Py_DECREF(r);
                PyErr_NoMemory();
                return NULL;
            }
        }
    }
    return r;
}

/* Plan.decode(data, start, end, kind, present1, present2, skip) -> Rows
 * kind: 0 write, 1 update, 2 delete. present2 only for updates. skip: event rows to drop (skip-rows). */
static PyObject *plan_decode(PlanObject *plan, PyObject *args) {
    Py_buffer data, b1, b2 = {0};
    Py_ssize_t start, end, skip = 0;
    int kind;
    if (!PyArg_ParseTuple(args, "y*nniy*|y*n", &data, &start, &end, &kind, &b1, &b2, &skip))
        return NULL;
    PyObject *result = NULL;
    int ncols = plan->ncols;
    if (start < 0 || end > data.len || start > end) {
        PyErr_SetString(Unsupported, "rows event bounds outside the packet");
        goto done;
    }
    if (b1.len * 8 < ncols || (kind == 1 && b2.len * 8 < ncols)) {
        PyErr_SetString(Unsupported, "column bitmap shorter than the table map");
        goto done;
    }
    RowsObject *rows = rows_new(plan);
    if (!rows)
        goto done;
    const uint8_t *p = (const uint8_t *)data.buf + start, *stop = (const uint8_t *)data.buf + end;
    Err e = {NULL, -1, 0};
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p < stop) {
        Py_ssize_t r0 = rows->nrows;
        if (decode_image(plan, rows, &p, stop, (const uint8_t *)b1.buf, ncols, &e)) {
            rc = -1;
            break;
        }
        if (kind == 1) {
            if (decode_image(plan, rows, &p, stop, (const uint8_t *)b2.buf, ncols, &e)) {
                rc = -1;
                break;
            }
            int changed = 0;
            for (int sl = 0; sl < plan->nslots && !changed; sl++)
                if (plan->slots[sl].is_pk && !slot_rows_equal(&plan->slots[sl], &rows->sb[sl], r0, r0 + 1))
                    changed = 1;
            /* a primary key change is a delete of the old key and an insert of the new one (Debezium) */
            uint8_t pair[2] = {changed ? 3 : 1, changed ? 0 : 2};
            if (buf_put(&rows->ops, pair, 2)) {
                rc = -1;
                e.oom = 1;
                break;
            }
            rows->nrows += 2;
        } else {
            uint8_t op = kind == 0 ? 0 : 3;
            if (buf_put(&rows->ops, &op, 1)) {
                rc = -1;
                e.oom = 1;
                break;
            }
            rows->nrows += 1;
        }
        rows->event_rows += 1;
        if (rows->event_rows <= skip) {
            rows_truncate(rows, 0);
        }
    }
    Py_END_ALLOW_THREADS
    if (rc) {
        if (e.oom)
            PyErr_NoMemory();
        else
            PyErr_Format(Unsupported, "column %d: %s", e.col, e.msg);
        Py_DECREF(rows);
        goto done;
    }
    if (rows->event_rows > skip)
        rows->event_rows -= skip;
    else
        rows->event_rows = 0;
    result = (PyObject *)rows;
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&b1);
    if (b2.obj)
        PyBuffer_Release(&b2);
    return result;
}

/* ------------------------------------------------------------------------------------------------ Plan type */

static void plan_dealloc(PlanObject *self) {
    free(self->slots);
    if (self->cols) {
        for (int i = 0; i < self->ncols; i++) {
            free(self->cols[i].label_ptr);
            free(self->cols[i].label_len);
            free(self->cols[i].table);
        }
    }
    free(self->cols);
    free(self->missing);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int slot_width_ok(const SlotSpec *s) {
    switch (s->tgt) {
    case TG_BOOL: case TG_I8: return s->width == 1;
    case TG_I16: return s->width == 2;
    case TG_I32: case TG_F32: case TG_DATE32: case TG_TIME32: return s->width == 4;
    case TG_I64: case TG_F64: case TG_TS: case TG_TIME64: return s->width == 8;
    case TG_DEC128: return s->width == 16;
    case TG_FSB: return s->width > 0;
    case TG_VAR: case TG_LIST: return s->width == 0;
    }
    return 0;
}

/* Does conversion `c` write exactly the layout of slot type `tgt`, reading a value of the size it expects? A plan
 * that does not would corrupt the buffers, so Plan() refuses it. */
static int kind_ok(const ColSpec *c, int tgt) {
    int fspb = (c->fsp + 1) / 2;
    int var = c->fixed == 0;
    switch (c->kind) {
    case K_SKIP: return 1;
    case K_INT:
        return (c->fixed == 1 || c->fixed == 2 || c->fixed == 3 || c->fixed == 4 || c->fixed == 8) &&
               (tgt == TG_BOOL || tgt == TG_I8 || tgt == TG_I16 || tgt == TG_I32 || tgt == TG_I64 ||
                tgt == TG_DEC128);
    case K_YEAR:
        return c->fixed == 1 && (tgt == TG_I16 || tgt == TG_I32 || tgt == TG_I64);
    case K_FLOAT: return c->fixed == 4 && (tgt == TG_F32 || tgt == TG_F64);
    case K_DOUBLE: return c->fixed == 8 && tgt == TG_F64;
    case K_DECIMAL: return tgt == TG_DEC128 || tgt == TG_VAR;
    case K_DATE: return c->fixed == 3 && tgt == TG_DATE32;
    case K_DATETIME2: return c->fixed == 5 + fspb && tgt == TG_TS;
    case K_TIMESTAMP2: return c->fixed == 4 + fspb && tgt == TG_TS;
    case K_TIME2: return c->fixed == 3 + fspb && (tgt == TG_TIME32 || tgt == TG_TIME64);
    case K_UTF8: case K_TABLE: case K_RAW: return var && tgt == TG_VAR;
    case K_PAD: return var && tgt == TG_FSB;
    case K_ENUM: return c->fixed >= 1 && c->fixed <= 2 && tgt == TG_VAR;
    case K_SET: return c->fixed >= 1 && c->fixed <= 8 && tgt == TG_LIST;
    case K_BIT: return c->fixed >= 1 && c->fixed <= 8 && (tgt == TG_BOOL || tgt == TG_FSB);
    case K_NULL: return 1;
    }
    return 0;
}

/* Plan(slots, columns)
 *   slots: [(tgt, width, is_pk, is_float), ...]
 *   columns: [(fixed, lenb, kind, slot, flags, fsp, prec, scale, bit_mask, zero_null, divisor,
 *              labels: list[bytes] | None, table: bytes(1280) | None), ...] */
static int plan_init(PlanObject *self, PyObject *args, PyObject *kw) {
    PyObject *slots, *cols;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &slots, &PyList_Type, &cols))
        return -1;
    self->nslots = (int)PyList_GET_SIZE(slots);
    self->ncols = (int)PyList_GET_SIZE(cols);
    self->slots = (SlotSpec *)calloc(self->nslots ? self->nslots : 1, sizeof(SlotSpec));
    self->cols = (ColSpec *)calloc(self->ncols ? self->ncols : 1, sizeof(ColSpec));
    self->missing = (int *)calloc(self->nslots ? self->nslots : 1, sizeof(int));
    self->keep = PyList_New(0);
    if (!self->slots || !self->cols || !self->missing || !self->keep) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < self->nslots; i++) {
        SlotSpec *s = &self->slots[i];
        if (!PyArg_ParseTuple(PyList_GET_ITEM(slots, i), "iiii", &s->tgt, &s->width, &s->is_pk, &s->is_float))
            return -1;
        if (s->tgt < TG_BOOL || s->tgt > TG_LIST || !slot_width_ok(s)) {
            PyErr_Format(PyExc_ValueError, "slot %d: invalid target %d / width %d", i, s->tgt, s->width);
            return -1;
        }
    }
    char *filled = (char *)calloc(self->nslots ? self->nslots : 1, 1);
    if (!filled) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < self->ncols; i++) {
        ColSpec *c = &self->cols[i];
        long long divisor;
        PyObject *labels, *table;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(cols, i), "iiiiiiiiiiLOO", &c->fixed, &c->lenb, &c->kind, &c->slot,
                              &c->flags, &c->fsp, &c->prec, &c->scale, &c->bit_mask, &c->zero_null, &divisor,
                              &labels, &table)) {
            free(filled);
            return -1;
        }
        c->divisor = divisor > 0 ? divisor : 1;
        if (c->slot >= self->nslots || (c->fixed == 0 && (c->lenb < 1 || c->lenb > 4)) || c->fixed < 0 ||
            c->fixed > 64 || c->fsp < 0 || c->fsp > 6 ||
            ((c->kind == K_INT || c->kind == K_BIT || c->kind == K_ENUM || c->kind == K_SET) && c->fixed > 8) ||
            (c->kind == K_DECIMAL && (c->prec < 1 || c->prec > 65 || c->scale < 0 || c->scale > c->prec ||
                                      c->fixed != decimal_size(c->prec, c->scale)))) {
            PyErr_Format(PyExc_ValueError, "column %d: invalid plan", i);
            free(filled);
            return -1;
        }
        if ((c->slot >= 0 && !kind_ok(c, self->slots[c->slot].tgt)) || (c->slot < 0 && c->kind != K_SKIP)) {
            PyErr_Format(PyExc_ValueError, "column %d: conversion %d does not fit its value size or slot", i,
                         c->kind);
            free(filled);
            return -1;
        }
        if (c->slot >= 0) {
            if (filled[c->slot]) {
                PyErr_Format(PyExc_ValueError, "column %d: slot %d filled twice", i, c->slot);
                free(filled);
                return -1;
            }
            filled[c->slot] = 1;
        }
        if (labels != Py_None) {
            if (!PyList_Check(labels)) {
                PyErr_SetString(PyExc_TypeError, "labels must be a list of bytes");
                free(filled);
                return -1;
            }
            Py_ssize_t nl = PyList_GET_SIZE(labels);
            c->nlabels = (int)nl;
            c->label_ptr = (const char **)calloc(nl ? nl : 1, sizeof(char *));
            c->label_len = (Py_ssize_t *)calloc(nl ? nl : 1, sizeof(Py_ssize_t));
            if (!c->label_ptr || !c->label_len) {
                PyErr_NoMemory();
                free(filled);
                return -1;
            }
            for (Py_ssize_t k = 0; k < nl; k++) {
                PyObject *item = PyList_GET_ITEM(labels, k);
                char *ptr;
                if (PyBytes_AsStringAndSize(item, &ptr, &c->label_len[k]) < 0) {
                    free(filled);
                    return -1;
                }
                c->label_ptr[k] = ptr;
                if (PyList_Append(self->keep, item) < 0) {
                    free(filled);
                    return -1;
                }
            }
        }
        if (table != Py_None) {
            char *ptr;
            Py_ssize_t n;
            if (PyBytes_AsStringAndSize(table, &ptr, &n) < 0 || n != 256 * 5) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "table must hold 1280 bytes");
                free(filled);
                return -1;
            }
            c->table = (uint8_t *)malloc(n);
            if (!c->table) {
                PyErr_NoMemory();
                free(filled);
                return -1;
            }
            memcpy(c->table, ptr, n);
        }
        if (c->kind == K_TABLE && !c->table) {
            PyErr_Format(PyExc_ValueError, "column %d: K_TABLE without a table", i);
            free(filled);
            return -1;
        }
    }
    self->nmissing = 0;
    for (int i = 0; i < self->nslots; i++)
        if (!filled[i])
            self->missing[self->nmissing++] = i;
    free(filled);
    return 0;
}

static PyMethodDef plan_methods[] = {
    {"decode", (PyCFunction)plan_decode, METH_VARARGS,
     "decode(data, start, end, kind, present1, present2=b'', skip=0) -> Rows"},
    {NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lakecdc.source._rowsdecoder.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_methods = plan_methods,
    .tp_doc = "How to decode the rows events of one table map into the slots of one SourceTable.",
};

/* ------------------------------------------------------------------------------------------------ Rows type */

static void rows_dealloc(RowsObject *self) {
    if (self->sb) {
        for (int i = 0; i < self->nslots; i++) {
            free(self->sb[i].valid.data);
            free(self->sb[i].data.data);
            free(self->sb[i].offs.data);
        }
        free(self->sb);
    }
    free(self->ops.data);
    Py_XDECREF(self->plan);
    PyObject_Free(self);
}

static PyObject *rows_get_nrows(RowsObject *self, void *closure) { return PyLong_FromSsize_t(self->nrows); }
static PyObject *rows_get_event_rows(RowsObject *self, void *closure) {
    return PyLong_FromSsize_t(self->event_rows);
}
static PyObject *rows_get_var_bytes(RowsObject *self, void *closure) {
    size_t most = 0;
    for (int i = 0; i < self->nslots; i++)
        if (self->sb[i].data.len > most)
            most = self->sb[i].data.len;
    return PyLong_FromSize_t(most);
}

static PyGetSetDef rows_getset[] = {
    {"num_changes", (getter)rows_get_nrows, NULL, "output rows (an UPDATE pair gives two)", NULL},
    {"num_rows", (getter)rows_get_event_rows, NULL, "rows of the event (an UPDATE pair counts once)", NULL},
    {"max_slot_bytes", (getter)rows_get_var_bytes, NULL, "the largest data buffer of any slot", NULL},
    {NULL},
};

static PyTypeObject RowsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lakecdc.source._rowsdecoder.Rows",
    .tp_basicsize = sizeof(RowsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)rows_dealloc,
    .tp_getset = rows_getset,
    .tp_doc = "The decoded rows of one rows event, in output order, per slot.",
};

/* ------------------------------------------------------------------------------------------------ concat */

static int same_layout(PlanObject *a, PlanObject *b) {
    if (a == b)
        return 1;
    if (a->nslots != b->nslots)
        return 0;
    for (int i = 0; i < a->nslots; i++)
        if (a->slots[i].tgt != b->slots[i].tgt || a->slots[i].width != b->slots[i].width)
            return 0;
    return 1;
}

static void pack_bits(uint8_t *out, Py_ssize_t at, const uint8_t *bytes, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t k = at + i;
        if (bytes[i])
            out[k >> 3] |= (uint8_t)(1u << (k & 7));
    }
}

/* concat(parts: list[Rows], ts: list[int]) ->
 *   (n, [(validity | None, null_count, buf1, buf2 | None) per slot], op characters (2 per row), op offsets,
 *    ts int64 bytes)
 * buf1/buf2: bool: bitmap, None; fixed/fsb: values, None; var: int32 offsets, data; list: int32 offsets,
 * int32 label indices. Raises OverflowError when a var slot exceeds 2 GiB (the caller splits). */
static PyObject *concat(PyObject *module, PyObject *args) {
    PyObject *parts, *tss;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &parts, &PyList_Type, &tss))
        return NULL;
    Py_ssize_t np = PyList_GET_SIZE(parts);
    if (np == 0 || PyList_GET_SIZE(tss) != np) {
        PyErr_SetString(PyExc_ValueError, "concat needs one ts per part and at least one part");
        return NULL;
    }
    int64_t *ts = (int64_t *)malloc(np * sizeof(int64_t));
    if (!ts)
        return PyErr_NoMemory();
    PlanObject *plan0 = NULL;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < np; i++) {
        PyObject *o = PyList_GET_ITEM(parts, i);
        if (!PyObject_TypeCheck(o, &RowsType)) {
            free(ts);
            PyErr_SetString(PyExc_TypeError, "parts must be Rows");
            return NULL;
        }
        RowsObject *r = (RowsObject *)o;
        if (!plan0)
            plan0 = r->plan;
        else if (!same_layout(plan0, r->plan)) {
            free(ts);
            PyErr_SetString(PyExc_ValueError, "parts have different slot layouts");
            return NULL;
        }
        ts[i] = PyLong_AsLongLong(PyList_GET_ITEM(tss, i));
        if (ts[i] == -1 && PyErr_Occurred()) {
            free(ts);
            return NULL;
        }
        n += r->nrows;
    }
    int nslots = plan0->nslots;
    PyObject *slot_list = PyList_New(nslots);
    PyObject *ops = PyBytes_FromStringAndSize(NULL, 2 * n); /* the op column's characters: every kind has two */
    PyObject *op_offs = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
    PyObject *tsb = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!slot_list || !ops || !op_offs || !tsb)
        goto error;
    {
        static const char kinds[4][2] = {{'+', 'I'}, {'-', 'U'}, {'+', 'U'}, {'-', 'D'}};
        char *o = PyBytes_AS_STRING(ops);
        int64_t *t = (int64_t *)PyBytes_AS_STRING(tsb);
        int32_t *oo = (int32_t *)PyBytes_AS_STRING(op_offs);
        for (Py_ssize_t k = 0; k <= n; k++)
            oo[k] = (int32_t)(2 * k);
        for (Py_ssize_t i = 0; i < np; i++) {
            RowsObject *r = (RowsObject *)PyList_GET_ITEM(parts, i);
            for (Py_ssize_t k = 0; k < r->nrows; k++) {
                memcpy(o, kinds[r->ops.data[k] & 3], 2);
                o += 2;
            }
            for (Py_ssize_t k = 0; k < r->nrows; k++)
                *t++ = ts[i];
        }
    }
    for (int sl = 0; sl < nslots; sl++) {
        const SlotSpec *spec = &plan0->slots[sl];
        Py_ssize_t nulls = 0;
        size_t data_len = 0;
        for (Py_ssize_t i = 0; i < np; i++) {
            RowsObject *r = (RowsObject *)PyList_GET_ITEM(parts, i);
            const SlotBuf *s = &r->sb[sl];
            for (Py_ssize_t k = 0; k < r->nrows; k++)
                nulls += !s->valid.data[k];
            data_len += s->data.len;
        }
        if ((spec->tgt == TG_VAR && data_len > (size_t)INT32_MAX) ||
            (spec->tgt == TG_LIST && data_len / 4 > (size_t)INT32_MAX)) {
            PyErr_SetString(PyExc_OverflowError, "slot data above 2 GiB");
            goto error;
        }
        Py_ssize_t bitmap_len = (n + 7) / 8;
        PyObject *validity = Py_None, *b1 = NULL, *b2 = Py_None;
        Py_INCREF(Py_None);
        Py_INCREF(Py_None);
        if (nulls) {
            Py_DECREF(validity);
            validity = PyBytes_FromStringAndSize(NULL, bitmap_len);
            if (!validity) {
                Py_DECREF(b2);
                goto error;
            }
            memset(PyBytes_AS_STRING(validity), 0, bitmap_len);
        }
        if (spec->tgt == TG_BOOL) {
            b1 = PyBytes_FromStringAndSize(NULL, bitmap_len);
            if (b1)
                memset(PyBytes_AS_STRING(b1), 0, bitmap_len);
        } else if (spec->tgt == TG_VAR || spec->tgt == TG_LIST) {
            b1 = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
            Py_DECREF(b2);
            b2 = PyBytes_FromStringAndSize(NULL, data_len);
        } else {
            b1 = PyBytes_FromStringAndSize(NULL, data_len);
        }
        if (!b1 || !b2) {
            Py_XDECREF(b1);
            Py_XDECREF(b2);
            Py_DECREF(validity);
            goto error;
        }
        Py_ssize_t at = 0;
        size_t dat = 0;
        for (Py_ssize_t i = 0; i < np; i++) {
            RowsObject *r = (RowsObject *)PyList_GET_ITEM(parts, i);
            const SlotBuf *s = &r->sb[sl];
            if (nulls)
                pack_bits((uint8_t *)PyBytes_AS_STRING(validity), at, s->valid.data, r->nrows);
            if (spec->tgt == TG_BOOL) {
                pack_bits((uint8_t *)PyBytes_AS_STRING(b1), at, s->data.data, r->nrows);
            } else if (spec->tgt == TG_VAR || spec->tgt == TG_LIST) {
                int32_t *offs = (int32_t *)PyBytes_AS_STRING(b1);
                int unit = spec->tgt == TG_LIST ? 4 : 1;
                int32_t base = (int32_t)(dat / unit);
                for (Py_ssize_t k = 0; k < r->nrows; k++) {
                    int32_t v;
                    memcpy(&v, r->sb[sl].offs.data + 4 * k, 4);
                    offs[at + k] = base + v;
                }
                if (s->data.len)
                    memcpy(PyBytes_AS_STRING(b2) + dat, s->data.data, s->data.len);
                dat += s->data.len;
            } else {
                if (s->data.len)
                    memcpy(PyBytes_AS_STRING(b1) + dat, s->data.data, s->data.len);
                dat += s->data.len;
            }
            at += r->nrows;
        }
        if (spec->tgt == TG_VAR || spec->tgt == TG_LIST) {
            int32_t *offs = (int32_t *)PyBytes_AS_STRING(b1);
            offs[n] = (int32_t)(dat / (spec->tgt == TG_LIST ? 4 : 1));
        }
        PyObject *tuple = Py_BuildValue("(NnNN)", validity, nulls, b1, b2);
        if (!tuple)
            goto error;
        PyList_SET_ITEM(slot_list, sl, tuple);
    }
    free(ts);
    return Py_BuildValue("(nNNNN)", n, slot_list, ops, op_offs, tsb);
error:
    free(ts);
    Py_XDECREF(slot_list);
    Py_XDECREF(ops);
    Py_XDECREF(op_offs);
    Py_XDECREF(tsb);
    return NULL;
}

/* ------------------------------------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"concat", concat, METH_VARARGS, "concat(parts, ts) -> (n, slots, ops, op_offsets, ts): merge decoded events"},
    {NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_rowsdecoder",
    "Columnar decoder of MySQL/MariaDB binlog rows events (see lakecdc/source/rows_decoder.py).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__rowsdecoder(void) {
    if (PyType_Ready(&PlanType) < 0 || PyType_Ready(&RowsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Unsupported = PyErr_NewException("lakecdc.source._rowsdecoder.Unsupported", PyExc_ValueError, NULL);
    Py_INCREF(Unsupported);
    PyModule_AddObject(m, "Unsupported", Unsupported);
    Py_INCREF(&PlanType);
    PyModule_AddObject(m, "Plan", (PyObject *)&PlanType);
    Py_INCREF(&RowsType);
    PyModule_AddObject(m, "Rows", (PyObject *)&RowsType);
    PyModule_AddIntConstant(m, "ABI", 1);
    return m;
}

/* The snapshot's text-protocol row scanner (TextRows); Python side: lakecdc/source/wire.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_buffers.h"

/* The rows of a streamed SELECT in MySQL's text protocol (the snapshot's chunk reads; Python side:
 * lakecdc/source/wire.py). TextRows.scan() walks the row packets in a buffer of received bytes (a packet is a 3-byte
 * little-endian payload length, a sequence id, the payload; a payload of 0xFFFFFF bytes continues in the next
 * packet; a field is 0xFB for NULL or a length-encoded string) and appends every field to its column, in the Arrow
 * layout of a binary array (int32 offsets, data, a validity bitmap made at the first NULL). It runs without the GIL,
 * so several readers' scans, their socket reads and the writer's encoding overlap. It stops, and reports why, at the
 * result's end (an EOF or ERR packet, which Python interprets), at a packet not yet received whole (Python receives
 * more bytes and scans again from there), when a block is full, or at a protocol error (Python closes the
 * connection and raises). The caller's buffer is only read; the field bytes are copied, so it can be reused at once.
 */

#define WIRE_MAX_PACKET 0xFFFFFF
enum { SCAN_MORE = 0, SCAN_FULL = 1, SCAN_END = 2, SCAN_SEQUENCE = 3, SCAN_FEWER = 4, SCAN_MORE_FIELDS = 5,
       SCAN_BAD_LENGTH = 6, SCAN_NOMEM = 7 };

typedef struct {
    Buf data;      /* the fields' bytes */
    Buf offs;      /* int32 offsets, rows + 1 */
    Buf valid;     /* validity bitmap (LSB first), empty until the column's first NULL */
    Py_ssize_t nulls;
} TextCol;

typedef struct {
    PyObject_HEAD
    int ncols;
    TextCol *cols;
    Py_ssize_t nrows;
    size_t bytes;  /* field bytes held, all columns */
    Buf joined;    /* one row whose payload spans several packets, joined */
    int busy;      /* a scan is running (without the GIL) */
} TextRowsObject;

static int textcol_reset(TextCol *c) {
    c->data.len = 0;
    c->offs.len = 0;
    c->valid.len = 0;
    c->nulls = 0;
    return buf_put_i32(&c->offs, 0);
}

/* Drop the rows held; -1: out of memory. */
static int textrows_reset(TextRowsObject *self) {
    for (int i = 0; i < self->ncols; i++) {
        TextCol *c = &self->cols[i];
        if (c->data.cap > ((size_t)1 << 26)) {  /* a block of huge rows: give the memory back */
            free(c->data.data);
            c->data.data = NULL;
            c->data.cap = 0;
        }
        if (textcol_reset(c))
            return -1;
    }
    self->nrows = 0;
    self->bytes = 0;
    return 0;
}

static int textrows_init(TextRowsObject *self, PyObject *args, PyObject *kw) {
    int ncols;
    if (!PyArg_ParseTuple(args, "i", &ncols))
        return -1;
    if (ncols < 1 || ncols > 65535) {
        PyErr_SetString(PyExc_ValueError, "a result has 1 to 65535 columns");
        return -1;
    }
    if (self->cols) {
        PyErr_SetString(PyExc_RuntimeError, "TextRows is already initialised");
        return -1;
    }
    self->cols = (TextCol *)calloc((size_t)ncols, sizeof(TextCol));
    if (!self->cols) {
        PyErr_NoMemory();
        return -1;
    }
    self->ncols = ncols;
    for (int i = 0; i < ncols; i++)
        if (textcol_reset(&self->cols[i])) {
            PyErr_NoMemory();
            return -1;
        }
    return 0;
}

static void textrows_dealloc(TextRowsObject *self) {
    if (self->cols) {
        for (int i = 0; i < self->ncols; i++) {
            free(self->cols[i].data.data);
            free(self->cols[i].offs.data);
            free(self->cols[i].valid.data);
        }
        free(self->cols);
    }
    free(self->joined.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Set bit `row` of a column's bitmap to `v`; the bitmap is created (all rows before valid) at the first NULL. */
static int textcol_set_valid(TextCol *c, Py_ssize_t row, int v) {
    size_t need = (size_t)(row >> 3) + 1;
    if (c->valid.len < need) {
        size_t old = c->valid.len;
        if (buf_reserve(&c->valid, need - old))
            return -1;
        memset(c->valid.data + old, 0, need - old);
        c->valid.len = need;
    }
    if (v)
        c->valid.data[row >> 3] |= (uint8_t)(1u << (row & 7));
    else
        c->valid.data[row >> 3] &= (uint8_t)~(1u << (row & 7));
    return 0;
}

static int textcol_first_null(TextCol *c, Py_ssize_t rows) {
    /* every row before this one was valid */
    size_t n = (size_t)(rows >> 3) + 1;
    if (buf_reserve(&c->valid, n))
        return -1;
    memset(c->valid.data, 0xFF, n);
    c->valid.len = n;
    return 0;
}

/* Append the fields of one row payload p[0:n] to the columns; on failure the columns are left part-filled
 * (the scan then drops every row held). */
static int textrows_put_row(TextRowsObject *s, const uint8_t *p, size_t n) {
    const uint8_t *q = p, *end = p + n;
    Py_ssize_t row = s->nrows;
    int status = 0, col = 0;
    for (; col < s->ncols; col++) {
        TextCol *c = &s->cols[col];
        if (q >= end) {
            status = SCAN_FEWER;
            break;
        }
        uint8_t b = *q++;
        uint64_t len;
        if (b < 0xFB) {
            len = b;
        } else if (b == 0xFB) {
            if (!c->valid.len && textcol_first_null(c, row)) {
                status = SCAN_NOMEM;
                break;
            }
            if (textcol_set_valid(c, row, 0) || buf_put_i32(&c->offs, (int32_t)c->data.len)) {
                status = SCAN_NOMEM;
                break;
            }
            c->nulls++;
            continue;
        } else {
            int size = b == 0xFC ? 2 : b == 0xFD ? 3 : b == 0xFE ? 8 : 0;
            if (!size) {
                status = SCAN_BAD_LENGTH;  /* 0xFF starts no field */
                break;
            }
            if ((size_t)(end - q) < (size_t)size) {
                status = SCAN_FEWER;
                break;
            }
            len = le_uint(q, size);
            q += size;
        }
        if (len > (uint64_t)(end - q)) {
            status = SCAN_FEWER;  /* the field runs past the row's end */
            break;
        }
        if (c->data.len + len > (size_t)INT32_MAX) {
            status = SCAN_NOMEM;  /* cannot happen below the caller's block limit */
            break;
        }
        if (buf_put(&c->data, q, (size_t)len) || buf_put_i32(&c->offs, (int32_t)(c->data.len)) ||
            (c->valid.len && textcol_set_valid(c, row, 1))) {
            status = SCAN_NOMEM;
            break;
        }
        q += len;
    }
    if (!status && q != end)
        status = SCAN_MORE_FIELDS;
    if (status)
        return status;  /* the caller drops every row held */
    s->nrows++;
    s->bytes += (size_t)(q - p);
    return 0;
}

static inline size_t packet_size(const uint8_t *h) { return (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16; }

/* scan(buf, pos, end, seq, max_rows, max_bytes) -> (status, pos, seq, got) */
static PyObject *textrows_scan(TextRowsObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end, max_rows, max_bytes;
    int seq;
    if (!PyArg_ParseTuple(args, "y*nninn", &view, &pos, &end, &seq, &max_rows, &max_bytes))
        return NULL;
    if (pos < 0 || end < pos || end > view.len || seq < 0 || seq > 255) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: position out of the buffer");
        return NULL;
    }
    if (self->busy || !self->cols) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "TextRows: a scan is already running or it is not initialised");
        return NULL;
    }
    self->busy = 1;
    const uint8_t *buf = (const uint8_t *)view.buf;
    int status = SCAN_MORE, got = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        if (self->nrows >= max_rows || self->bytes >= (size_t)max_bytes) {
            status = SCAN_FULL;
            break;
        }
        if (end - pos < 4)
            break;  /* SCAN_MORE */
        const uint8_t *h = buf + pos;
        size_t size = packet_size(h);
        if (h[3] != seq) {
            status = SCAN_SEQUENCE;
            got = h[3];
            break;
        }
        if ((size_t)(end - pos - 4) < size)
            break;  /* SCAN_MORE: the packet is not whole yet */
        const uint8_t *payload = h + 4;
        if (size && (payload[0] == 0xFF || (payload[0] == 0xFE && size < 9))) {
            status = SCAN_END;  /* an ERR packet, or an EOF packet (a row starting 0xFE has an 8-byte length) */
            break;
        }
        if (size < WIRE_MAX_PACKET) {
            int st = textrows_put_row(self, payload, size);
            if (st) {
                status = st;
                break;
            }
            pos += 4 + (Py_ssize_t)size;
            seq = (seq + 1) & 0xFF;
            continue;
        }
        /* a row longer than 16 MiB: its payload continues in the next packets, up to one shorter than the maximum;
         * it is taken only when all of them are whole in the buffer */
        Py_ssize_t at = pos;
        int s = seq, whole = 0;
        size_t total = 0;
        for (;;) {
            if (end - at < 4)
                break;
            const uint8_t *hh = buf + at;
            size_t sz = packet_size(hh);
            if (hh[3] != s) {
                status = SCAN_SEQUENCE;
                got = hh[3];
                pos = at;
                seq = s;
                break;
            }
            if ((size_t)(end - at - 4) < sz)
                break;
            total += sz;
            at += 4 + (Py_ssize_t)sz;
            s = (s + 1) & 0xFF;
            if (sz < WIRE_MAX_PACKET) {
                whole = 1;
                break;
            }
        }
        if (status == SCAN_SEQUENCE || !whole)
            break;  /* a sequence error, or SCAN_MORE at the row's first packet */
        self->joined.len = 0;
        if (buf_reserve(&self->joined, total)) {
            status = SCAN_NOMEM;
            break;
        }
        for (Py_ssize_t p = pos; p < at;) {
            size_t sz = packet_size(buf + p);
            buf_put(&self->joined, buf + p + 4, sz);
            p += 4 + (Py_ssize_t)sz;
        }
        int st = textrows_put_row(self, self->joined.data, self->joined.len);
        if (st) {
            status = st;
            break;
        }
        pos = at;
        seq = s;
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    PyBuffer_Release(&view);
    if (self->joined.cap > ((size_t)1 << 26)) {  /* do not keep a huge row's buffer */
        free(self->joined.data);
        self->joined.data = NULL;
        self->joined.len = self->joined.cap = 0;
    }
    if (status >= SCAN_SEQUENCE && textrows_reset(self))
        status = SCAN_NOMEM;  /* a protocol error: the rows held are dropped (the connection is closed) */
    if (status == SCAN_NOMEM)
        return PyErr_NoMemory();
    return Py_BuildValue("(inii)", status, pos, seq, got);
}

/* take() -> (rows, [(validity bytes or None, null count, offsets bytes, data bytes) per column]); empties it */
static PyObject *textrows_take(TextRowsObject *self, PyObject *noargs) {
    if (self->busy || !self->cols) {
        PyErr_SetString(PyExc_RuntimeError, "TextRows: a scan is running or it is not initialised");
        return NULL;
    }
    PyObject *columns = PyList_New(self->ncols);
    if (!columns)
        return NULL;
    for (int i = 0; i < self->ncols; i++) {
        TextCol *c = &self->cols[i];
        PyObject *valid;
        if (c->nulls) {
            valid = bytes_of(&c->valid);
        } else {
            valid = Py_None;
            Py_INCREF(valid);
        }
        PyObject *item = valid ? Py_BuildValue("(NnNN)", valid, c->nulls, bytes_of(&c->offs), bytes_of(&c->data))
                               : NULL;
        if (!item) {
            Py_DECREF(columns);
            return NULL;
        }
        PyList_SET_ITEM(columns, i, item);
    }
    PyObject *out = Py_BuildValue("(nN)", self->nrows, columns);
    if (!out)
        return NULL;
    if (textrows_reset(self)) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return out;
}

/* clear(): drop the rows held (a result being discarded) */
static PyObject *textrows_clear(TextRowsObject *self, PyObject *noargs) {
    if (self->busy || !self->cols) {
        PyErr_SetString(PyExc_RuntimeError, "TextRows: a scan is running or it is not initialised");
        return NULL;
    }
    if (textrows_reset(self))
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *textrows_get_rows(TextRowsObject *self, void *closure) { return PyLong_FromSsize_t(self->nrows); }

static PyMethodDef textrows_methods[] = {
    {"scan", (PyCFunction)textrows_scan, METH_VARARGS,
     "scan(buf, pos, end, seq, max_rows, max_bytes) -> (status, pos, seq, got): append the row packets in "
     "buf[pos:end] (first sequence id seq) until max_rows rows or max_bytes field bytes are held"},
    {"take", (PyCFunction)textrows_take, METH_NOARGS,
     "take() -> (rows, [(validity or None, null count, offsets, data) per column]); empties the object"},
    {"clear", (PyCFunction)textrows_clear, METH_NOARGS, "clear(): drop the rows held"},
    {NULL},
};

static PyGetSetDef textrows_getset[] = {
    {"num_rows", (getter)textrows_get_rows, NULL, "rows held", NULL},
    {NULL},
};

static PyTypeObject TextRowsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lakecdc.source._rowsdecoder.TextRows",
    .tp_basicsize = sizeof(TextRowsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)textrows_init,
    .tp_dealloc = (destructor)textrows_dealloc,
    .tp_methods = textrows_methods,
    .tp_getset = textrows_getset,
    .tp_doc = "The text-protocol rows of a streamed SELECT, scanned into per-column binary arrays (TextRows(columns)).",
};

/* ------------------------------------------------------------------------------------------------ module */

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_textrows",
    "Scanner of MySQL text-protocol result rows into Arrow column buffers (see lakecdc/source/wire.py).", -1, NULL,
};

PyMODINIT_FUNC PyInit__textrows(void) {
    if (PyType_Ready(&TextRowsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Py_INCREF(&TextRowsType);
    PyModule_AddObject(m, "TextRows", (PyObject *)&TextRowsType);
    PyModule_AddIntConstant(m, "SCAN_MORE", SCAN_MORE);
    PyModule_AddIntConstant(m, "SCAN_FULL", SCAN_FULL);
    PyModule_AddIntConstant(m, "SCAN_END", SCAN_END);
    PyModule_AddIntConstant(m, "SCAN_SEQUENCE", SCAN_SEQUENCE);
    PyModule_AddIntConstant(m, "SCAN_FEWER", SCAN_FEWER);
    PyModule_AddIntConstant(m, "SCAN_MORE_FIELDS", SCAN_MORE_FIELDS);
    PyModule_AddIntConstant(m, "SCAN_BAD_LENGTH", SCAN_BAD_LENGTH);
    return m;
}

/* Growable byte buffers shared by lakecdc's C extensions (_rowsdecoder.c, _textrows.c), and little-endian
 * integers. Header-only: each extension gets its own static copy. */
#ifndef LAKECDC_BUFFERS_H
#define LAKECDC_BUFFERS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Buf;

static inline int buf_reserve(Buf *b, size_t extra) {
    size_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    uint8_t *p = (uint8_t *)realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (n == 0)
        return 0;
    if (buf_reserve(b, n))
        return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static inline int buf_zero(Buf *b, size_t n) {
    if (n == 0)
        return 0;
    if (buf_reserve(b, n))
        return -1;
    memset(b->data + b->len, 0, n);
    b->len += n;
    return 0;
}

static inline int buf_put_i32(Buf *b, int32_t v) { return buf_put(b, &v, 4); }

static inline PyObject *bytes_of(const Buf *b) {
    return PyBytes_FromStringAndSize(b->len ? (const char *)b->data : "", (Py_ssize_t)b->len);
}

static inline uint64_t le_uint(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#endif

/* Reading the records section of a Kafka v2 record batch, in C: shared by
 * core.storage._native and api._render (included by both; every function is static).
 *
 * Record layout (Kafka's DefaultRecord): length varint, attributes int8,
 * timestampDelta varlong, offsetDelta varint, keyLength varint, key, valueLength
 * varint, value, header count varint, headers. Varints are zigzag-encoded. Bounds are
 * checked on every read: bad bytes never read past the buffer.
 */
#ifndef FRANZ_KAFKA_RECORDS_H
#define FRANZ_KAFKA_RECORDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Reader;

/* zigzag varint (up to 64 bits); 0 on success, -1 on a truncated or overlong one */
static int read_varlong(Reader *r, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    while (r->p < r->end) {
        unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 0;
        }
        shift += 7;
        if (shift > 63) return -1;
    }
    return -1;
}

/* one bytes field (length, data): -1 length = null */
typedef struct {
    const unsigned char *data;
    int64_t len;
} Field;

static int read_field(Reader *r, Field *f) {
    if (read_varlong(r, &f->len) < 0) return -1;
    if (f->len < -1) return -1;
    if (f->len == -1) {
        f->data = NULL;
        return 0;
    }
    if (f->len > r->end - r->p) return -1;
    f->data = r->p;
    r->p += f->len;
    return 0;
}

static PyObject *bad(const char *what, Py_ssize_t index) {
    PyErr_Format(PyExc_ValueError, "record %zd of the batch: %s", index, what);
    return NULL;
}

#endif

/* core.storage._native: per-record loops of Kafka's record format, in C.
 *
 * record_sizes(records, count) -> list[int]: cumulative key + value sizes of a batch's
 * records (how reads cut at max_bytes) without decoding them.
 * encode_records(values, keys) -> bytes: the records section of a batch with one
 * timestamp and no headers (the produce path's common case).
 *
 * Kafka format only: JSON rendering lives in api._render.
 */
#include "_kafka_records.h"

/* record_sizes(records, count) -> list[int]: s[i] = key + value bytes of the first i
 * records (count + 1 items; a null counts 0). Headers are skipped, not parsed. */
static PyObject *record_sizes(PyObject *self, PyObject *args) {
    Py_buffer records;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &records, &count)) return NULL;
    PyObject *out = NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "negative record count");
        goto done;
    }
    out = PyList_New(count + 1);
    if (out == NULL) goto done;
    Reader r = {(const unsigned char *)records.buf,
                (const unsigned char *)records.buf + records.len};
    long long total = 0;
    PyObject *zero = PyLong_FromLongLong(0);
    if (zero == NULL) {
        Py_CLEAR(out);
        goto done;
    }
    PyList_SET_ITEM(out, 0, zero);
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, skip;
        Field key, value;
        if (read_varlong(&r, &length) < 0 || length < 1 || length > r.end - r.p) {
            Py_CLEAR(out);
            bad("bad record length", i);
            goto done;
        }
        Reader rec = {r.p + 1, r.p + length}; /* past the attributes byte */
        r.p += length;
        if (read_varlong(&rec, &skip) < 0 || read_varlong(&rec, &skip) < 0 ||
            read_field(&rec, &key) < 0 || read_field(&rec, &value) < 0) {
            Py_CLEAR(out);
            bad("truncated record", i);
            goto done;
        }
        total += (key.len > 0 ? key.len : 0) + (value.len > 0 ? value.len : 0);
        PyObject *n = PyLong_FromLongLong(total);
        if (n == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i + 1, n);
    }
done:
    PyBuffer_Release(&records);
    return out;
}

static Py_ssize_t varint_size(int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static char *varint_write(char *o, int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (u >= 0x80) {
        *o++ = (char)((u & 0x7f) | 0x80);
        u >>= 7;
    }
    *o++ = (char)u;
    return o;
}

static int nullable_bytes(PyObject *item, const char **data, Py_ssize_t *len) {
    if (item == Py_None) {
        *data = NULL;
        *len = -1;
        return 0;
    }
    if (!PyBytes_CheckExact(item)) {
        PyErr_SetString(PyExc_TypeError, "keys and values must be bytes or None");
        return -1;
    }
    *data = PyBytes_AS_STRING(item);
    *len = PyBytes_GET_SIZE(item);
    return 0;
}

static PyObject *encode_records(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *values, *keys;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &values, &keys)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (keys != Py_None && (!PyList_CheckExact(keys) || PyList_GET_SIZE(keys) != n)) {
        PyErr_SetString(PyExc_TypeError, "keys must be None or a list as long as values");
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* sizes first: one allocation */
        const char *d;
        Py_ssize_t klen = -1, vlen;
        if (nullable_bytes(PyList_GET_ITEM(values, i), &d, &vlen) < 0) return NULL;
        if (keys != Py_None && nullable_bytes(PyList_GET_ITEM(keys, i), &d, &klen) < 0)
            return NULL;
        Py_ssize_t body = 1 + 1 + varint_size(i) + varint_size(klen) + (klen > 0 ? klen : 0) +
                          varint_size(vlen) + (vlen > 0 ? vlen : 0) + 1;
        total += varint_size(body) + body;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    char *o = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *key = NULL, *value;
        Py_ssize_t klen = -1, vlen;
        nullable_bytes(PyList_GET_ITEM(values, i), &value, &vlen);
        if (keys != Py_None) nullable_bytes(PyList_GET_ITEM(keys, i), &key, &klen);
        Py_ssize_t body = 1 + 1 + varint_size(i) + varint_size(klen) + (klen > 0 ? klen : 0) +
                          varint_size(vlen) + (vlen > 0 ? vlen : 0) + 1;
        o = varint_write(o, body);
        *o++ = 0; /* attributes */
        *o++ = 0; /* timestamp delta */
        o = varint_write(o, i);
        o = varint_write(o, klen);
        if (klen > 0) {
            memcpy(o, key, klen);
            o += klen;
        }
        o = varint_write(o, vlen);
        if (vlen > 0) {
            memcpy(o, value, vlen);
            o += vlen;
        }
        *o++ = 0; /* no headers */
    }
    return out;
}

static PyMethodDef methods[] = {
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(values, keys) -> bytes: a v2 batch's records section (offset deltas "
     "0..n-1, timestamp delta 0, no headers)."},
    {"record_sizes", record_sizes, METH_VARARGS,
     "record_sizes(records, count) -> list[int]: cumulative key + value bytes of a v2 "
     "batch's records (count + 1 items)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "core.storage._native",
    "Per-record loops of Kafka's record format, in C (see core.storage.native).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }

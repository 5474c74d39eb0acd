/* core.storage._native: per-record loops of Kafka's record format, in C.
 *
 * record_sizes(records, count) -> list[int]: cumulative key + value sizes of a batch's
 * records (how reads cut at max_bytes) without decoding them.
 * check_records(records, count, keys_required): every record of an untrusted batch
 * checked as readers will decode it, in one pass.
 * encode_records(...) -> the records section of a produce batch: keys, headers and
 * per-record timestamps, all records or a chosen subset (one partition's) in one pass;
 * encode_built(...) -> that section as a whole uncompressed batch, header and CRC-32C
 * included.
 * key_partitions(keys, n), murmur2(data): Kafka's default partitioner.
 * reserve_blocks(fd, offset, length): blocks for a segment's next writes, size unchanged.
 *
 * Kafka format only: JSON rendering lives in api._render.
 */
#include "_kafka_records.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

/* record_sizes(records, count) -> list[int]: s[i] = key + value bytes of the first i
 * records (count + 1 items; a null counts 0). Headers are skipped, not parsed. */
static PyObject *record_sizes(PyObject *Py_UNUSED(self), PyObject *args) {
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

/* check_records(records, count, keys_required) -> None | (index, message, kind): every
 * record of a batch's (decompressed) records section decoded the way readers will,
 * without building any object: length, attributes (unused, but a high bit set would
 * read as a varint to aiokafka's decoder: refused), timestamp delta, offset delta
 * (must be the record's index), key, value, headers (keys non-null UTF-8, values
 * null at any negative length, as the codecs read them), each record exactly its length, nothing after the last. The first fault
 * is answered, not raised: kind is "corrupt", "offset" (a delta out of sequence) or
 * "key" (a null key where keys_required). One pass over the bytes: the produce path
 * of untrusted batches (the Kafka door, the internal append). */
static PyObject *record_fault(Py_ssize_t index, const char *message, const char *kind) {
    return Py_BuildValue("(nss)", index, message, kind);
}

static int valid_utf8(const unsigned char *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (p[i] >= 0x80) { /* rare in header keys: Python's strict decoder decides */
            PyObject *s = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, "strict");
            if (s == NULL) {
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(s);
            return 1;
        }
    }
    return 1;
}

static PyObject *check_records(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer records;
    Py_ssize_t count;
    int keys_required;
    if (!PyArg_ParseTuple(args, "y*np", &records, &count, &keys_required)) return NULL;
    PyObject *out = NULL;
    if (count < 0) {
        out = record_fault(0, "negative record count", "corrupt");
        goto done;
    }
    Reader r = {(const unsigned char *)records.buf,
                (const unsigned char *)records.buf + records.len};
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, header_count;
        Field key, value;
        if (read_varlong(&r, &length) < 0 || length < 1 || length > r.end - r.p) {
            out = record_fault(i, "bad record length", "corrupt");
            goto done;
        }
        if (*r.p & 0x80) { /* unused in v2; aiokafka's reader takes it for a varint */
            out = record_fault(i, "record attributes byte has its high bit set", "corrupt");
            goto done;
        }
        Reader rec = {r.p + 1, r.p + length}; /* past the attributes byte */
        r.p += length;
        if (read_varlong(&rec, &ts_delta) < 0 || read_varlong(&rec, &offset_delta) < 0 ||
            read_field(&rec, &key) < 0 || read_field(&rec, &value) < 0 ||
            read_varlong(&rec, &header_count) < 0) {
            out = record_fault(i, "truncated record", "corrupt");
            goto done;
        }
        if (offset_delta != i) {
            char message[48];
            snprintf(message, sizeof message, "offset delta %lld", (long long)offset_delta);
            out = record_fault(i, message, "offset");
            goto done;
        }
        if (header_count < 0 || header_count > rec.end - rec.p) {
            out = record_fault(i, "bad record header count", "corrupt");
            goto done;
        }
        for (int64_t j = 0; j < header_count; j++) {
            Field hk;
            int64_t hv_len; /* any negative length is a null value, as the codecs read it */
            if (read_field(&rec, &hk) < 0 || hk.len < 0 || read_varlong(&rec, &hv_len) < 0 ||
                hv_len > rec.end - rec.p) {
                out = record_fault(i, "bad record header", "corrupt");
                goto done;
            }
            if (hv_len > 0) rec.p += hv_len;
            if (!valid_utf8(hk.data, hk.len)) {
                out = record_fault(i, "record header key is not UTF-8", "corrupt");
                goto done;
            }
        }
        if (rec.p != rec.end) {
            out = record_fault(i, "record length does not match its fields", "corrupt");
            goto done;
        }
        if (keys_required && key.len < 0) {
            out = record_fault(i, "null key", "key");
            goto done;
        }
    }
    if (r.p != r.end) {
        out = record_fault(count, "bytes left after the last record", "corrupt");
        goto done;
    }
    out = Py_NewRef(Py_None);
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
        PyErr_SetString(PyExc_TypeError, "keys, values and header values must be bytes or None");
        return -1;
    }
    *data = PyBytes_AS_STRING(item);
    *len = PyBytes_GET_SIZE(item);
    return 0;
}

/* One header (key str, value bytes or None) as its parts; -1 with TypeError otherwise. */
static int header_parts(PyObject *h, const char **hk, Py_ssize_t *hklen, const char **hv,
                        Py_ssize_t *hvlen) {
    if (!(PyTuple_CheckExact(h) || PyList_CheckExact(h)) || PySequence_Fast_GET_SIZE(h) != 2) {
        PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes | None) pair");
        return -1;
    }
    PyObject *k = PySequence_Fast_GET_ITEM(h, 0);
    if (!PyUnicode_CheckExact(k)) {
        PyErr_SetString(PyExc_TypeError, "a header key must be a str");
        return -1;
    }
    *hk = PyUnicode_AsUTF8AndSize(k, hklen); /* cached in the str after the first call */
    if (*hk == NULL) return -1;
    return nullable_bytes(PySequence_Fast_GET_ITEM(h, 1), hv, hvlen);
}

/* The encoded size of a record's headers section (count varint included), or -1. */
static Py_ssize_t headers_size(PyObject *hs) {
    if (hs == Py_None) return 1;
    if (!PyList_CheckExact(hs)) {
        PyErr_SetString(PyExc_TypeError, "headers must be lists");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(hs), size = varint_size(n);
    for (Py_ssize_t j = 0; j < n; j++) {
        const char *hk, *hv;
        Py_ssize_t hklen, hvlen;
        if (header_parts(PyList_GET_ITEM(hs, j), &hk, &hklen, &hv, &hvlen) < 0) return -1;
        size += varint_size(hklen) + hklen + varint_size(hvlen) + (hvlen > 0 ? hvlen : 0);
    }
    return size;
}

static char *headers_write(char *o, PyObject *hs) {
    if (hs == Py_None) {
        *o++ = 0;
        return o;
    }
    Py_ssize_t n = PyList_GET_SIZE(hs);
    o = varint_write(o, n);
    for (Py_ssize_t j = 0; j < n; j++) { /* checked by headers_size: cannot fail */
        const char *hk, *hv;
        Py_ssize_t hklen, hvlen;
        header_parts(PyList_GET_ITEM(hs, j), &hk, &hklen, &hv, &hvlen);
        o = varint_write(o, hklen);
        memcpy(o, hk, hklen);
        o += hklen;
        o = varint_write(o, hvlen);
        if (hvlen > 0) {
            memcpy(o, hv, hvlen);
            o += hvlen;
        }
    }
    return o;
}

/* The column index of the batch's j-th record: idxs[j], or j without idxs. */
static int column_index(PyObject *idxs, Py_ssize_t j, Py_ssize_t n, Py_ssize_t *out) {
    if (idxs == Py_None) {
        *out = j;
        return 0;
    }
    Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(idxs, j));
    if (i == -1 && PyErr_Occurred()) return -1;
    if (i < 0 || i >= n) {
        PyErr_SetString(PyExc_IndexError, "record index out of range");
        return -1;
    }
    *out = i;
    return 0;
}

/* A record's timestamp: timestamps[i], or now when that is None (or there is no column). */
static int record_timestamp(PyObject *timestamps, Py_ssize_t i, long long now, long long *out) {
    PyObject *t = timestamps == Py_None ? Py_None : PyList_GET_ITEM(timestamps, i);
    if (t == Py_None) {
        *out = now;
        return 0;
    }
    if (!PyLong_CheckExact(t)) {
        PyErr_SetString(PyExc_TypeError, "timestamps must be ints or None");
        return -1;
    }
    *out = PyLong_AsLongLong(t); /* OverflowError past int64 */
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A record's size after its length varint: attributes, deltas, key, value, headers. */
static Py_ssize_t record_body_size(long long ts_delta, Py_ssize_t offset_delta, Py_ssize_t klen,
                                   Py_ssize_t vlen, Py_ssize_t headers) {
    return 1 + varint_size(ts_delta) + varint_size(offset_delta) + varint_size(klen) +
           (klen > 0 ? klen : 0) + varint_size(vlen) + (vlen > 0 ? vlen : 0) + headers;
}

static int optional_column(PyObject *col, Py_ssize_t n, const char *name) {
    if (col != Py_None && (!PyList_CheckExact(col) || PyList_GET_SIZE(col) != n)) {
        PyErr_Format(PyExc_TypeError, "%s must be None or a list as long as values", name);
        return -1;
    }
    return 0;
}

/* encode_records(values, keys, headers=None, timestamps=None, now=0, idxs=None)
 *   -> (records section, first timestamp, max timestamp)
 * The records section of one v2 batch holding the records idxs[0], idxs[1], ... of the
 * columns (all of them, in order, when idxs is None), offset deltas 0..n-1, timestamp
 * deltas against the first record's timestamp, exactly as Kafka's (and the Python)
 * builders write them. keys / headers / timestamps: a list as long as values, or None
 * (no keys, no headers, every timestamp `now`); a None timestamp is `now` too. */
typedef struct {
    PyObject *values, *keys, *headers, *timestamps, *idxs;
    long long now;
    Py_ssize_t n, count;
} Columns;

static int parse_columns(Columns *c) {
    c->n = PyList_GET_SIZE(c->values);
    if (optional_column(c->keys, c->n, "keys") < 0 ||
        optional_column(c->headers, c->n, "headers") < 0 ||
        optional_column(c->timestamps, c->n, "timestamps") < 0)
        return -1;
    if (c->idxs != Py_None && !PyList_CheckExact(c->idxs)) {
        PyErr_SetString(PyExc_TypeError, "idxs must be None or a list of ints");
        return -1;
    }
    c->count = c->idxs == Py_None ? c->n : PyList_GET_SIZE(c->idxs);
    if (c->count == 0) {
        PyErr_SetString(PyExc_ValueError, "a batch needs at least one record");
        return -1;
    }
    return 0;
}

/* The records section's size, first and max timestamps; -1 with an exception on a
 * column item the builder must not judge. */
static Py_ssize_t records_size(const Columns *c, long long *first, long long *max) {
    Py_ssize_t total = 0;
    for (Py_ssize_t j = 0; j < c->count; j++) {
        const char *d;
        Py_ssize_t i, klen = -1, vlen, hsize;
        long long ts;
        if (column_index(c->idxs, j, c->n, &i) < 0 ||
            record_timestamp(c->timestamps, i, c->now, &ts) < 0)
            return -1;
        if (j == 0) *first = *max = ts;
        else if (ts > *max) *max = ts;
        if (nullable_bytes(PyList_GET_ITEM(c->values, i), &d, &vlen) < 0) return -1;
        if (c->keys != Py_None && nullable_bytes(PyList_GET_ITEM(c->keys, i), &d, &klen) < 0)
            return -1;
        hsize = headers_size(c->headers == Py_None ? Py_None : PyList_GET_ITEM(c->headers, i));
        if (hsize < 0) return -1;
        Py_ssize_t body = record_body_size(ts - *first, j, klen, vlen, hsize);
        total += varint_size(body) + body;
    }
    return total;
}

/* Write the records section at o (records_size accepted the columns); returns the end. */
static char *records_write(char *o, const Columns *c, long long first) {
    for (Py_ssize_t j = 0; j < c->count; j++) {
        const char *key = NULL, *value = NULL;
        Py_ssize_t i = j, klen = -1, vlen = -1;
        long long ts = c->now;
        column_index(c->idxs, j, c->n, &i);
        record_timestamp(c->timestamps, i, c->now, &ts);
        PyObject *hs = c->headers == Py_None ? Py_None : PyList_GET_ITEM(c->headers, i);
        nullable_bytes(PyList_GET_ITEM(c->values, i), &value, &vlen);
        if (c->keys != Py_None) nullable_bytes(PyList_GET_ITEM(c->keys, i), &key, &klen);
        Py_ssize_t body = record_body_size(ts - first, j, klen, vlen, headers_size(hs));
        o = varint_write(o, body);
        *o++ = 0; /* attributes */
        o = varint_write(o, ts - first);
        o = varint_write(o, j);
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
        o = headers_write(o, hs);
    }
    return o;
}

static PyObject *encode_records(PyObject *self, PyObject *args) {
    (void)self;
    Columns c = {.headers = Py_None, .timestamps = Py_None, .idxs = Py_None, .now = 0};
    if (!PyArg_ParseTuple(args, "O!O|OOLO", &PyList_Type, &c.values, &c.keys, &c.headers,
                          &c.timestamps, &c.now, &c.idxs))
        return NULL;
    if (parse_columns(&c) < 0) return NULL;
    long long first = 0, max = 0;
    Py_ssize_t total = records_size(&c, &first, &max);
    if (total < 0) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    records_write(PyBytes_AS_STRING(out), &c, first);
    return Py_BuildValue("(NLL)", out, first, max);
}

/* CRC-32C (Castagnoli), as Kafka's batch CRC: SSE4.2's crc32 instruction where the CPU
 * has it, else a table. */
static uint32_t CRC32C_TABLE[256];

static void init_crc32c(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        CRC32C_TABLE[i] = c;
    }
}

static uint32_t crc32c_table(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n--) c = CRC32C_TABLE[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const unsigned char *p,
                                                                size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}

static uint32_t crc32c_here(const unsigned char *p, size_t n) {
    static int sse42 = -1;
    if (sse42 < 0) sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    return sse42 ? crc32c_sse42(p, n) : crc32c_table(p, n);
}
#else
static uint32_t crc32c_here(const unsigned char *p, size_t n) { return crc32c_table(p, n); }
#endif

/* The crc32c library's function (the codec's CRC: three interleaved SSE4.2 streams,
 * ~2.5x the single stream above on a 100 KB batch), when it can be imported. */
static PyObject *crc32c_library = NULL;

/* CRC-32C of n bytes at p; -1 (as a wider value) with an exception set on failure */
static int64_t crc32c(const unsigned char *p, size_t n) {
    if (crc32c_library == NULL || n < 256) return crc32c_here(p, n);
    PyObject *view = PyMemoryView_FromMemory((char *)p, (Py_ssize_t)n, PyBUF_READ);
    if (view == NULL) return -1;
    PyObject *r = PyObject_CallOneArg(crc32c_library, view);
    Py_DECREF(view);
    if (r == NULL) return -1;
    unsigned long c = PyLong_AsUnsignedLong(r);
    Py_DECREF(r);
    if (c == (unsigned long)-1 && PyErr_Occurred()) return -1;
    return (int64_t)(uint32_t)c;
}

static char *put_be(char *o, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) o[i] = (char)(v & 0xff), v >>= 8;
    return o + bytes;
}

#define BATCH_HEADER_SIZE 61

/* encode_built(values, keys, headers, timestamps, now, idxs, producer_id, producer_epoch,
 *              base_sequence, cls) -> cls
 * One whole uncompressed v2 batch (base offset 0, partition leader epoch -1, CRC set)
 * of the records encode_records writes, as an instance of cls (a bytearray subclass,
 * core.storage.batch.BuiltBatch): the bytes batch.assemble_batch writes. */
static PyObject *encode_built(PyObject *self, PyObject *args) {
    (void)self;
    Columns c = {.now = 0};
    long long producer_id;
    int producer_epoch, base_sequence;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "O!OOOLOLiiO", &PyList_Type, &c.values, &c.keys, &c.headers,
                          &c.timestamps, &c.now, &c.idxs, &producer_id, &producer_epoch,
                          &base_sequence, &cls))
        return NULL;
    if (parse_columns(&c) < 0) return NULL;
    if (c.count > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many records for one batch");
        return NULL;
    }
    long long first = 0, max = 0;
    Py_ssize_t total = records_size(&c, &first, &max);
    if (total < 0) return NULL;
    if (total > INT32_MAX - BATCH_HEADER_SIZE) {
        PyErr_SetString(PyExc_OverflowError, "batch too large");
        return NULL;
    }
    Py_ssize_t size = BATCH_HEADER_SIZE + total;
    PyObject *out = PyObject_CallFunction(cls, "n", size);
    if (out == NULL) return NULL;
    if (!PyByteArray_Check(out) || PyByteArray_GET_SIZE(out) != size) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "cls must make a bytearray of the size given");
        return NULL;
    }
    char *b = PyByteArray_AS_STRING(out), *o = b;
    o = put_be(o, 0, 8);                                  /* base offset */
    o = put_be(o, (uint64_t)(size - 12), 4);              /* batch length */
    o = put_be(o, (uint64_t)(int64_t)-1, 4);              /* partition leader epoch */
    *o++ = 2;                                             /* magic */
    o += 4;                                               /* crc, below */
    o = put_be(o, 0, 2);                                  /* attributes */
    o = put_be(o, (uint64_t)(c.count - 1), 4);            /* last offset delta */
    o = put_be(o, (uint64_t)first, 8);                    /* base timestamp */
    o = put_be(o, (uint64_t)max, 8);                      /* max timestamp */
    o = put_be(o, (uint64_t)producer_id, 8);
    o = put_be(o, (uint64_t)(int64_t)producer_epoch, 2);
    o = put_be(o, (uint64_t)(int64_t)base_sequence, 4);
    o = put_be(o, (uint64_t)c.count, 4);                  /* records count */
    records_write(o, &c, first);
    int64_t crc = crc32c((const unsigned char *)b + 21, (size_t)(size - 21));
    if (crc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    put_be(b + 17, (uint64_t)crc, 4);
    return out;
}

/* reserve_blocks(fd, offset, length) -> bool: give bytes [offset, offset + length) of
 * the file real blocks without changing its size (fallocate FALLOC_FL_KEEP_SIZE), so the
 * writes that fill them skip the file system's per-block allocation. False when the
 * file system cannot or the disk refuses (ENOSPC, EDQUOT, EIO): writes allocate as
 * before. */
static PyObject *reserve_blocks(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    long long offset, length;
    if (!PyArg_ParseTuple(args, "iLL", &fd, &offset, &length)) return NULL;
    if (offset < 0 || length <= 0) {
        PyErr_SetString(PyExc_ValueError, "offset must be >= 0 and length > 0");
        return NULL;
    }
#ifdef FALLOC_FL_KEEP_SIZE
    int rc;
    Py_BEGIN_ALLOW_THREADS
    do {
        rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
    } while (rc < 0 && errno == EINTR);
    Py_END_ALLOW_THREADS
    if (rc == 0) Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

/* crc32c(data) -> int: the CRC-32C of the bytes by this module's own code, the one
 * used without the crc32c library (tests compare it with the library's). */
static PyObject *crc32c_py(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    uint32_t c = crc32c_here((const unsigned char *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(c);
}

/* Kafka's Utils.murmur2 (MurmurHash2, 32 bits, seed 0x9747b28c), as a signed int. */
static int32_t murmur2_hash(const unsigned char *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t words = length / 4;
    for (Py_ssize_t i = 0; i < words; i++) {
        const unsigned char *w = data + 4 * i;
        uint32_t k = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 |
                     (uint32_t)w[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * words;
    switch (length & 3) { /* Java's fall-through switch */
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *murmur2(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    int32_t h = murmur2_hash((const unsigned char *)data.buf, data.len);
    PyBuffer_Release(&data);
    return PyLong_FromLong(h);
}

/* key_partitions(keys, num_partitions) -> dict[int, list[int]]: Kafka's default
 * partitioner over a column of keys, toPositive(murmur2(key)) % num_partitions; each
 * partition's list holds the indexes of its records in input order; records with a
 * null key are listed under -1. */
/* Index ints 0..INDEX_CACHE-1, made once: a keyed request's partition lists hold
 * thousands of them and Python caches only up to 256. */
#define INDEX_CACHE 16384
static PyObject *index_ints[INDEX_CACHE];

static PyObject *index_int(Py_ssize_t i) {
    if (i >= INDEX_CACHE) return PyLong_FromSsize_t(i);
    PyObject *v = index_ints[i];
    if (v == NULL && (v = index_ints[i] = PyLong_FromSsize_t(i)) == NULL) return NULL;
    Py_INCREF(v);
    return v;
}

/* The partition of each key (-1: null), into parts; -2 on a key that is not bytes. */
static int hash_keys(PyObject *keys, Py_ssize_t n, long parts, int32_t *out) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (key == Py_None) {
            out[i] = -1;
        } else if (PyBytes_CheckExact(key)) {
            int32_t h = murmur2_hash((const unsigned char *)PyBytes_AS_STRING(key),
                                     PyBytes_GET_SIZE(key));
            out[i] = (int32_t)((long)((uint32_t)h & 0x7fffffffu) % parts);
        } else {
            PyErr_SetString(PyExc_TypeError, "keys must be bytes or None");
            return -1;
        }
    }
    return 0;
}

static PyObject *key_partitions(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *keys;
    Py_ssize_t parts;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &keys, &parts)) return NULL;
    if (parts <= 0 || parts > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "num_partitions must be in 1..2^31-1");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    /* part[i]: record i's partition; slot[i]: the rank of that partition among the
     * distinct ones in order of first appearance (found through a small open-addressing
     * table), so each list is made at its size once and filled in input order */
    Py_ssize_t cap = 8;
    while (cap < 2 * n) cap <<= 1;
    int32_t *part = PyMem_Malloc(sizeof(int32_t) * (size_t)(2 * n + 2 * cap + 1));
    if (part == NULL) return PyErr_NoMemory();
    int32_t *slot = part + n, *table_p = slot + n, *table_s = table_p + cap;
    int32_t *sizes = NULL;
    PyObject *out = NULL, **lists = NULL;
    Py_ssize_t distinct = 0;
    if (hash_keys(keys, n, (long)parts, part) < 0) goto done;
    for (Py_ssize_t t = 0; t < cap; t++) table_s[t] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i && part[i] == part[i - 1]) {
            slot[i] = slot[i - 1];
            continue;
        }
        Py_ssize_t t = ((uint32_t)part[i] * 2654435761u) & (uint32_t)(cap - 1);
        while (table_s[t] >= 0 && table_p[t] != part[i]) t = (t + 1) & (cap - 1);
        if (table_s[t] < 0) {
            table_p[t] = part[i];
            table_s[t] = (int32_t)distinct++;
        }
        slot[i] = table_s[t];
    }
    sizes = PyMem_Calloc((size_t)(distinct ? distinct : 1), sizeof(int32_t));
    lists = PyMem_Calloc((size_t)(distinct ? distinct : 1), sizeof(PyObject *));
    if (sizes == NULL || lists == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) sizes[slot[i]]++;
    out = PyDict_New();
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t sl = slot[i];
        if (lists[sl] == NULL) { /* first record of this partition */
            PyObject *pk = PyLong_FromLong(part[i]);
            PyObject *list = PyList_New(sizes[sl]);
            if (pk == NULL || list == NULL || PyDict_SetItem(out, pk, list) < 0) {
                Py_XDECREF(pk);
                Py_XDECREF(list);
                goto fail;
            }
            Py_DECREF(pk);
            Py_DECREF(list); /* the dict holds it */
            lists[sl] = list;
            sizes[sl] = 0; /* from now on: the next free position */
        }
        PyObject *idx = index_int(i);
        if (idx == NULL) goto fail;
        PyList_SET_ITEM(lists[sl], sizes[sl]++, idx);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyMem_Free(part);
    PyMem_Free(sizes);
    PyMem_Free(lists);
    return out;
}

/* scatter_offsets(total, runs) -> (partitions, offsets): the per-record answer of a
 * produce request appended to several partitions, back in input order. runs: a list of
 * (partition, first_offset, order) where order lists the input indexes appended there
 * in log order (a list of ints or a range); records in no run read None. */
static PyObject *scatter_offsets(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t total;
    PyObject *runs;
    if (!PyArg_ParseTuple(args, "nO!", &total, &PyList_Type, &runs)) return NULL;
    if (total < 0) {
        PyErr_SetString(PyExc_ValueError, "negative total");
        return NULL;
    }
    PyObject *parts = PyList_New(total), *offsets = PyList_New(total);
    if (parts == NULL || offsets == NULL) goto fail;
    for (Py_ssize_t i = 0; i < total; i++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(parts, i, Py_None);
        Py_INCREF(Py_None);
        PyList_SET_ITEM(offsets, i, Py_None);
    }
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(runs); r++) {
        PyObject *run = PyList_GET_ITEM(runs, r), *order, *seq = NULL;
        long long first;
        PyObject *partition;
        if (!PyTuple_CheckExact(run) || PyTuple_GET_SIZE(run) != 3) {
            PyErr_SetString(PyExc_TypeError, "a run is (partition, first_offset, order)");
            goto fail;
        }
        partition = PyTuple_GET_ITEM(run, 0);
        first = PyLong_AsLongLong(PyTuple_GET_ITEM(run, 1));
        if (first == -1 && PyErr_Occurred()) goto fail;
        order = PyTuple_GET_ITEM(run, 2);
        seq = PySequence_Fast(order, "order must be a sequence of ints");
        if (seq == NULL) goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t k = 0; k < n; k++) {
            Py_ssize_t i = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, k));
            if (i == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                goto fail;
            }
            if (i < 0 || i >= total) {
                Py_DECREF(seq);
                PyErr_SetString(PyExc_IndexError, "record index out of range");
                goto fail;
            }
            PyObject *off = PyLong_FromLongLong(first + k);
            if (off == NULL) {
                Py_DECREF(seq);
                goto fail;
            }
            Py_INCREF(partition);
            PyList_SetItem(parts, i, partition); /* steals; drops the None it replaces */
            PyList_SetItem(offsets, i, off);
        }
        Py_DECREF(seq);
    }
    return Py_BuildValue("(NN)", parts, offsets);
fail:
    Py_XDECREF(parts);
    Py_XDECREF(offsets);
    return NULL;
}

/* start_sync_thread(requests_fd, results_fd): a thread of its own, without the GIL,
 * that reads 8-byte requests (int32 fd, int32 token; native byte order) from
 * requests_fd, calls fdatasync(fd) then close(fd) (the caller sends a dup), and writes
 * 8-byte results (int32 token, int32 errno or 0) to results_fd. It ends, closing both
 * fds, at end of file on requests_fd or when results_fd is closed (EPIPE). */
typedef struct {
    int requests, results;
} SyncPipes;

static int full_io(int fd, void *buf, size_t n, int writing) {
    char *p = buf;
    while (n) {
        ssize_t k = writing ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void *sync_thread(void *arg) {
    SyncPipes pipes = *(SyncPipes *)arg;
    free(arg);
    for (;;) {
        int32_t req[2], res[2];
        if (full_io(pipes.requests, req, sizeof(req), 0) < 0) break;
        int rc = fdatasync(req[0]);
        res[0] = req[1];
        res[1] = rc == 0 ? 0 : errno;
        close(req[0]);
        if (full_io(pipes.results, res, sizeof(res), 1) < 0) break;
    }
    close(pipes.requests);
    close(pipes.results);
    return NULL;
}

static PyObject *start_sync_thread(PyObject *self, PyObject *args) {
    (void)self;
    int requests, results;
    if (!PyArg_ParseTuple(args, "ii", &requests, &results)) return NULL;
    SyncPipes *pipes = malloc(sizeof(SyncPipes));
    if (pipes == NULL) return PyErr_NoMemory();
    pipes->requests = requests;
    pipes->results = results;
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int rc = pthread_create(&thread, &attr, sync_thread, pipes);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(pipes);
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* new_buffer(n) -> bytearray: n bytes whose contents are not set. bytearray(n) writes n
 * zeros, making every page of a large buffer resident before anything is received into
 * it; these pages stay untouched until written (received into), so a connection's
 * buffer for a frame holds the memory of the bytes that really arrived. */
static PyObject *new_buffer(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, n);
}

static PyMethodDef methods[] = {
    {"encode_built", encode_built, METH_VARARGS,
     "encode_built(values, keys, headers, timestamps, now, idxs, producer_id, "
     "producer_epoch, base_sequence, cls) -> cls: a whole uncompressed v2 batch of "
     "encode_records' records, CRC set."},
    {"crc32c", crc32c_py, METH_VARARGS, "crc32c(data) -> int: CRC-32C of the bytes."},
    {"reserve_blocks", reserve_blocks, METH_VARARGS,
     "reserve_blocks(fd, offset, length) -> bool: blocks for bytes [offset, offset + "
     "length) of the file, its size unchanged (False: not reserved)."},
    {"start_sync_thread", start_sync_thread, METH_VARARGS,
     "start_sync_thread(requests_fd, results_fd): a GIL-free thread serving fdatasync "
     "requests (see core.storage.data_sync)."},
    {"scatter_offsets", scatter_offsets, METH_VARARGS,
     "scatter_offsets(total, runs) -> (partitions, offsets): per-record partitions and "
     "offsets in input order from (partition, first_offset, order) runs."},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(values, keys, headers=None, timestamps=None, now=0, idxs=None) -> "
     "(records, first_timestamp, max_timestamp): a v2 batch's records section of the "
     "records idxs (all when None), offset deltas 0..n-1."},
    {"key_partitions", key_partitions, METH_VARARGS,
     "key_partitions(keys, num_partitions) -> dict[int, list[int]]: Kafka's default "
     "partitioner over a column of keys (null keys under -1)."},
    {"murmur2", murmur2, METH_VARARGS,
     "murmur2(data) -> int: Kafka's Utils.murmur2, a signed 32-bit int."},
    {"check_records", check_records, METH_VARARGS,
     "check_records(records, count, keys_required) -> None | (index, message, kind): "
     "every record of a v2 records section decoded as readers will, the first fault "
     "answered (kind: corrupt, offset, key)."},
    {"new_buffer", new_buffer, METH_VARARGS,
     "new_buffer(n) -> bytearray: n bytes whose contents are not set (pages untouched "
     "until written)."},
    {"record_sizes", record_sizes, METH_VARARGS,
     "record_sizes(records, count) -> list[int]: cumulative key + value bytes of a v2 "
     "batch's records (count + 1 items)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "core.storage._native",
    .m_doc = "Per-record loops of Kafka's record format, in C (see core.storage.native).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    init_crc32c();
    PyObject *lib = PyImport_ImportModule("crc32c");
    if (lib != NULL) {
        crc32c_library = PyObject_GetAttrString(lib, "crc32c");
        Py_DECREF(lib);
    }
    PyErr_Clear(); /* without the library: this module's own CRC */
    return PyModule_Create(&module);
}

/* api._render: the per-record loops of the REST API's hot paths, in C.
 *
 * render_records(records, count, base_offset, base_timestamp, log_append_time,
 *                head, mid[, lo, hi]) -> (text, ends) | None
 *
 * Walks the (uncompressed) records section of a v2 record batch and writes every
 * record through a JSON template given by the caller, the fragments joined by commas
 * in one bytes object (text), the end of each in it in ends (native uint64s):
 *
 *   head  KEY  ,"value":  VALUE  mid  OFFSET  ,"timestamp":  TS
 *   ,"timestamp_type":"CreateTime|LogAppendTime","headers":[]}
 *
 * KEY / VALUE are `null` or the standard padded base64 of the bytes in quotes.
 * OFFSET is base_offset + the record's offset delta; TS the base timestamp + its
 * delta, or log_append_time for every record when that is not None.
 *
 * With lo and hi (0 <= lo <= hi <= count) only records lo..hi-1 are rendered: the
 * ones before are stepped over by their length prefix, the ones after not read (a
 * 1-record read of a 1000-record batch renders one record).
 *
 * Returns None when a rendered record carries headers (the caller's general path
 * renders those); raises ValueError on a records section that does not parse.
 *
 * b64decode_list(items) -> list[bytes] | None: the base64 columns of a produce request
 * (32-character blocks with AVX2 when the CPU has it and FRANZ_NO_AVX2 is not set in the
 * environment at import; the tests compare both). Rendering encodes base64 with AVX2 too,
 * under the same condition.
 * produce_columns(body, max_records) -> (values, keys | None) | None: those columns read
 * straight from a binary produce body of the usual shape (no parsed document).
 * produce_offsets(partitions, offsets) -> bytes: a produce answer's offsets, in JSON.
 */
#include "_kafka_records.h"

static const char B64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static const char VALUE_SEP[] = ",\"value\":";
static const char TS_SEP[] = ",\"timestamp\":";
static const char CREATE_TAIL[] = ",\"timestamp_type\":\"CreateTime\",\"headers\":[]}";
static const char APPEND_TAIL[] = ",\"timestamp_type\":\"LogAppendTime\",\"headers\":[]}";

static Py_ssize_t b64_len(Py_ssize_t n) { return ((n + 2) / 3) * 4; }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define B64_AVX2 1
static int have_avx2; /* set at import: the CPU runs AVX2 */

/* The n bytes at s encoded 24 at a time into 32 characters at o with AVX2, while 28 can
 * be read (each 128-bit half loads 16 bytes and uses 12); the bytes consumed.
 *
 * Each half's 12 bytes are spread so that every 32-bit lane holds one group b0 b1 b2 as
 * the bytes b1 b0 b2 b1: its low 16 bits are then b0 b1 and its high 16 bits b1 b2, big
 * endian, and the four 6-bit indices (b0 >> 2, the next 6 bits, ..., b2 & 63) sit at
 * bits 15-10 and 9-4 of the low word and 11-6 and 5-0 of the high word. A multiply-high
 * brings the first and third down to bits 5-0, a multiply-low the second and fourth up
 * to bits 13-8: the lane's bytes are the four indices in order. An index becomes its
 * character by adding the offset of its range (0-25: +65, 26-51: +71, 52-61: -4,
 * 62: -19, 63: -16), looked up by a small number derived from the index. */
__attribute__((target("avx2")))
static Py_ssize_t encode_blocks_avx2(char *o, const unsigned char *s, Py_ssize_t n) {
    const __m256i spread = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,
                                            1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
    const __m256i first_third = _mm256_set1_epi32(0x0FC0FC00);
    const __m256i down = _mm256_set1_epi32(0x04000040);  /* words x 64, x 1024: high half */
    const __m256i second_fourth = _mm256_set1_epi32(0x003F03F0);
    const __m256i up = _mm256_set1_epi32(0x01000010);    /* words x 16, x 256 */
    /* offset by range number: 0 = 26-51, 1-10 = 52-61, 11 = 62, 12 = 63, 13 = 0-25 */
    const __m256i offsets = _mm256_setr_epi8(71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19,
                                             -16, 65, 0, 0, 71, -4, -4, -4, -4, -4, -4, -4,
                                             -4, -4, -4, -19, -16, 65, 0, 0);
    const __m256i above_51 = _mm256_set1_epi8(51), below_26 = _mm256_set1_epi8(26);
    const __m256i upper_range = _mm256_set1_epi8(13);
    Py_ssize_t i = 0;
    for (; n - i >= 28; i += 24, o += 32) {
        __m256i in = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(s + i))),
            _mm_loadu_si128((const __m128i *)(s + i + 12)), 1);
        in = _mm256_shuffle_epi8(in, spread);
        __m256i idx = _mm256_or_si256(
            _mm256_mulhi_epu16(_mm256_and_si256(in, first_third), down),
            _mm256_mullo_epi16(_mm256_and_si256(in, second_fourth), up));
        __m256i range = _mm256_or_si256(
            _mm256_subs_epu8(idx, above_51),
            _mm256_and_si256(_mm256_cmpgt_epi8(below_26, idx), upper_range));
        __m256i chars = _mm256_add_epi8(idx, _mm256_shuffle_epi8(offsets, range));
        _mm256_storeu_si256((__m256i *)o, chars);
    }
    return i;
}
#endif

static char *b64_write(char *o, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
#ifdef B64_AVX2
    if (have_avx2 && n >= 28) {
        i = encode_blocks_avx2(o, s, n);
        o += i / 3 * 4;
    }
#endif
    for (; i + 2 < n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        o[0] = B64[v >> 18];
        o[1] = B64[(v >> 12) & 63];
        o[2] = B64[(v >> 6) & 63];
        o[3] = B64[v & 63];
        o += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        o[0] = B64[v >> 18];
        o[1] = B64[(v >> 12) & 63];
        o[2] = '=';
        o[3] = '=';
        o += 4;
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        o[0] = B64[v >> 18];
        o[1] = B64[(v >> 12) & 63];
        o[2] = B64[(v >> 6) & 63];
        o[3] = '=';
        o += 4;
    }
    return o;
}

/* decimal text of v into buf (at least 21 bytes); returns its length */
static int format_int(char *buf, int64_t v) {
    char tmp[21];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    int len = 0;
    if (v < 0) buf[len++] = '-';
    while (n) buf[len++] = tmp[--n];
    return len;
}

static Py_ssize_t field_json_len(const Field *f) {
    return f->data == NULL ? 4 : b64_len((Py_ssize_t)f->len) + 2;
}

static char *field_json_write(char *o, const Field *f) {
    if (f->data == NULL) {
        memcpy(o, "null", 4);
        return o + 4;
    }
    *o++ = '"';
    o = b64_write(o, f->data, (Py_ssize_t)f->len);
    *o++ = '"';
    return o;
}

/* The rendering being written: the fragments back to back in one bytes object
 * (allocated at an estimate, resized at the end: one large allocation, as a join's), a
 * comma between two, and the end (exclusive) of each fragment in the text. */
typedef struct {
    PyObject *text, *ends;
    Py_ssize_t len, cap;
} Joined;

/* Room for `more` bytes at the end of j->text; -1 with MemoryError. */
static int joined_reserve(Joined *j, Py_ssize_t more) {
    if (j->len + more <= j->cap) return 0;
    Py_ssize_t cap = j->cap * 2 > j->len + more ? j->cap * 2 : j->len + more;
    if (_PyBytes_Resize(&j->text, cap) < 0) return -1;
    j->cap = cap;
    return 0;
}

static PyObject *render_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer records, head, mid;
    Py_ssize_t count;
    long long base_offset, base_timestamp;
    PyObject *log_append_time;
    Py_ssize_t lo = 0, hi = -1;
    if (!PyArg_ParseTuple(args, "y*nLLOy*y*|nn", &records, &count, &base_offset,
                          &base_timestamp, &log_append_time, &head, &mid, &lo, &hi))
        return NULL;
    PyObject *out = NULL;
    Joined j = {NULL, NULL, 0, 0};
    int append_time = log_append_time != Py_None;
    long long lat = 0;
    if (append_time) {
        lat = PyLong_AsLongLong(log_append_time);
        if (lat == -1 && PyErr_Occurred()) goto done;
    }
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "negative record count");
        goto done;
    }
    int whole = hi < 0;
    if (whole) hi = count;
    if (lo < 0 || lo > hi || hi > count) {
        PyErr_SetString(PyExc_ValueError, "record range outside the batch");
        goto done;
    }
    const char *tail = append_time ? APPEND_TAIL : CREATE_TAIL;
    Py_ssize_t tail_len = (Py_ssize_t)strlen(tail);
    Py_ssize_t fixed = head.len + (Py_ssize_t)(sizeof(VALUE_SEP) - 1) + mid.len +
                       (Py_ssize_t)(sizeof(TS_SEP) - 1) + tail_len;
    /* base64 is 4/3 of the bytes; the framing of a record ~ fixed + 40 */
    j.cap = records.len / 3 * 4 + (hi - lo) * (fixed + 48) + 64;
    j.text = PyBytes_FromStringAndSize(NULL, j.cap);
    j.ends = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(uint64_t) * (hi - lo));
    if (j.text == NULL || j.ends == NULL) goto done;
    Reader r = {(const unsigned char *)records.buf,
                (const unsigned char *)records.buf + records.len};
    for (Py_ssize_t i = 0; i < hi; i++) {
        int64_t length, ts_delta, off_delta, n_headers;
        if (read_varlong(&r, &length) < 0 || length < 0 || length > r.end - r.p) {
            bad("bad record length", i);
            goto done;
        }
        Reader rec = {r.p, r.p + length};
        r.p += length;
        if (i < lo) continue;
        Field key, value;
        if (rec.p >= rec.end) {
            bad("empty record", i);
            goto done;
        }
        rec.p++; /* attributes: unused in v2 records */
        if (read_varlong(&rec, &ts_delta) < 0 || read_varlong(&rec, &off_delta) < 0 ||
            read_field(&rec, &key) < 0 || read_field(&rec, &value) < 0 ||
            read_varlong(&rec, &n_headers) < 0) {
            bad("truncated record", i);
            goto done;
        }
        if (n_headers != 0) { /* the general path renders headers */
            out = Py_NewRef(Py_None);
            goto done;
        }
        if (rec.p != rec.end) {
            bad("record length does not match its fields", i);
            goto done;
        }
        char off_text[21], ts_text[21];
        int off_len = format_int(off_text, (int64_t)base_offset + off_delta);
        int ts_len = format_int(ts_text, append_time ? lat : (int64_t)base_timestamp + ts_delta);
        Py_ssize_t size = fixed + field_json_len(&key) + field_json_len(&value) + off_len + ts_len;
        if (joined_reserve(&j, size + 1) < 0) goto done;
        char *t = PyBytes_AS_STRING(j.text);
        if (i > lo) t[j.len++] = ',';
        char *o = t + j.len;
        j.len += size;
        uint64_t end = (uint64_t)j.len;
        memcpy(PyBytes_AS_STRING(j.ends) + sizeof(uint64_t) * (size_t)(i - lo), &end,
               sizeof end);
        memcpy(o, head.buf, head.len);
        o += head.len;
        o = field_json_write(o, &key);
        memcpy(o, VALUE_SEP, sizeof(VALUE_SEP) - 1);
        o += sizeof(VALUE_SEP) - 1;
        o = field_json_write(o, &value);
        memcpy(o, mid.buf, mid.len);
        o += mid.len;
        memcpy(o, off_text, off_len);
        o += off_len;
        memcpy(o, TS_SEP, sizeof(TS_SEP) - 1);
        o += sizeof(TS_SEP) - 1;
        memcpy(o, ts_text, ts_len);
        o += ts_len;
        memcpy(o, tail, tail_len);
    }
    if (whole && r.p != r.end)
        PyErr_SetString(PyExc_ValueError, "bytes left after the batch's last record");
    else if (_PyBytes_Resize(&j.text, j.len) == 0)
        out = PyTuple_Pack(2, j.text, j.ends);
done:
    Py_XDECREF(j.text);
    Py_XDECREF(j.ends);
    PyBuffer_Release(&records);
    PyBuffer_Release(&head);
    PyBuffer_Release(&mid);
    return out;
}

/* b64decode_list(items) -> list[bytes] | None: each item, a str of canonical standard
 * base64 (length a multiple of 4, alphabet A-Z a-z 0-9 + /, at most two '=' at the end,
 * zero padding bits), decoded. None as soon as an item is anything else: the caller's
 * general path then decides and names the bad item. */
static signed char B64_VALUE[256];

#define B64_BAD 0x01000000u
static uint32_t B64_D0[256], B64_D1[256], B64_D2[256], B64_D3[256];

static void init_b64_values(void) {
    memset(B64_VALUE, -1, sizeof(B64_VALUE));
    for (int i = 0; i < 256; i++) B64_D0[i] = B64_D1[i] = B64_D2[i] = B64_D3[i] = B64_BAD;
    for (int i = 0; i < 64; i++) {
        unsigned char c = (unsigned char)B64[i];
        B64_VALUE[c] = (signed char)i;
        B64_D0[c] = (uint32_t)i << 18;
        B64_D1[c] = (uint32_t)i << 12;
        B64_D2[c] = (uint32_t)i << 6;
        B64_D3[c] = (uint32_t)i;
    }
}

#ifdef B64_AVX2
/* The whole 32-character blocks of the n characters at s (all inside the padding-free
 * part) decoded to 24 bytes each at o, with AVX2; the characters consumed (a multiple of
 * 32), or -1 when a block holds a character outside the alphabet.
 *
 * A character's 6-bit value is the character plus an offset fixed by the range of the
 * alphabet it lies in (A-Z: -65, a-z: -71, 0-9: +4, '+': +19, '/': +16); a character in
 * no range makes the block invalid (bytes >= 0x80 compare as negative: in no range).
 * Each 4 values a b c d then become the 24-bit (a << 18 | b << 12 | c << 6 | d): pairs
 * joined by a multiply-add of bytes (x 64, x 1), then of 16-bit words (x 4096, x 1);
 * the three low bytes of each 32-bit lane, high first, are the output. */
__attribute__((target("avx2")))
static Py_ssize_t decode_blocks_avx2(const unsigned char *s, Py_ssize_t n, unsigned char *o) {
    const __m256i upper_lo = _mm256_set1_epi8('A' - 1), upper_hi = _mm256_set1_epi8('Z' + 1);
    const __m256i lower_lo = _mm256_set1_epi8('a' - 1), lower_hi = _mm256_set1_epi8('z' + 1);
    const __m256i digit_lo = _mm256_set1_epi8('0' - 1), digit_hi = _mm256_set1_epi8('9' + 1);
    const __m256i plus = _mm256_set1_epi8('+'), slash = _mm256_set1_epi8('/');
    const __m256i upper_off = _mm256_set1_epi8(-65), lower_off = _mm256_set1_epi8(-71);
    const __m256i digit_off = _mm256_set1_epi8(4), plus_off = _mm256_set1_epi8(19);
    const __m256i slash_off = _mm256_set1_epi8(16);
    const __m256i join_pairs = _mm256_set1_epi32(0x01400140);  /* bytes 64, 1, 64, 1 */
    const __m256i join_words = _mm256_set1_epi32(0x00011000);  /* words 4096, 1 */
    const __m256i order = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12,
                                           -1, -1, -1, -1, 2, 1, 0, 6, 5, 4, 10, 9, 8,
                                           14, 13, 12, -1, -1, -1, -1);
    const __m256i pack = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
    Py_ssize_t i = 0;
    for (; i + 32 <= n; i += 32, o += 24) {
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i upper = _mm256_and_si256(_mm256_cmpgt_epi8(c, upper_lo),
                                         _mm256_cmpgt_epi8(upper_hi, c));
        __m256i lower = _mm256_and_si256(_mm256_cmpgt_epi8(c, lower_lo),
                                         _mm256_cmpgt_epi8(lower_hi, c));
        __m256i digit = _mm256_and_si256(_mm256_cmpgt_epi8(c, digit_lo),
                                         _mm256_cmpgt_epi8(digit_hi, c));
        __m256i is_plus = _mm256_cmpeq_epi8(c, plus), is_slash = _mm256_cmpeq_epi8(c, slash);
        __m256i valid = _mm256_or_si256(_mm256_or_si256(upper, lower),
                                        _mm256_or_si256(digit, _mm256_or_si256(is_plus,
                                                                               is_slash)));
        if (_mm256_movemask_epi8(valid) != -1) return -1;
        __m256i off = _mm256_or_si256(
            _mm256_or_si256(_mm256_and_si256(upper, upper_off),
                            _mm256_and_si256(lower, lower_off)),
            _mm256_or_si256(_mm256_and_si256(digit, digit_off),
                            _mm256_or_si256(_mm256_and_si256(is_plus, plus_off),
                                            _mm256_and_si256(is_slash, slash_off))));
        __m256i v = _mm256_add_epi8(c, off);
        __m256i d = _mm256_madd_epi16(_mm256_maddubs_epi16(v, join_pairs), join_words);
        d = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(d, order), pack);
        _mm_storeu_si128((__m128i *)o, _mm256_castsi256_si128(d));
        _mm_storel_epi64((__m128i *)(o + 16), _mm256_extracti128_si256(d, 1));
    }
    return i;
}
#endif

/* The bytes of n characters of canonical standard base64 at s; NULL (no exception set)
 * when they are not that, or with MemoryError set. */
static PyObject *decode_span(const unsigned char *s, Py_ssize_t n) {
    if (n % 4) return NULL;
    Py_ssize_t pad = 0;
    if (n && s[n - 1] == '=') pad = (n >= 2 && s[n - 2] == '=') ? 2 : 1;
    Py_ssize_t out_len = n / 4 * 3 - pad;
    PyObject *out = PyBytes_FromStringAndSize(NULL, out_len);
    if (out == NULL) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t full = pad ? n - 4 : n, i = 0;
#ifdef B64_AVX2
    if (have_avx2 && full >= 32) {
        i = decode_blocks_avx2(s, full, o);
        if (i < 0) goto reject;
        o += i / 4 * 3;
    }
#endif
    for (; i < full; i += 4) {
        /* one table per position, pre-shifted: one OR per character, one test per
         * quantum (an invalid character sets B64_BAD) */
        uint32_t v = B64_D0[s[i]] | B64_D1[s[i + 1]] | B64_D2[s[i + 2]] | B64_D3[s[i + 3]];
        if (v & B64_BAD) goto reject;
        o[0] = (unsigned char)(v >> 16);
        o[1] = (unsigned char)(v >> 8);
        o[2] = (unsigned char)v;
        o += 3;
    }
    if (pad) {
        const unsigned char *q = s + n - 4;
        int a = B64_VALUE[q[0]], b = B64_VALUE[q[1]];
        int c = pad == 1 ? B64_VALUE[q[2]] : 0;
        if ((a | b | c) < 0) goto reject;
        uint32_t v = ((uint32_t)a << 18) | ((uint32_t)b << 12) | ((uint32_t)c << 6);
        if (pad == 2 ? (v & 0xffff) : (v & 0xff)) goto reject; /* non-zero padding bits */
        *o++ = (unsigned char)(v >> 16);
        if (pad == 1) *o++ = (unsigned char)(v >> 8);
    }
    return out;
reject:
    Py_DECREF(out);
    return NULL;
}

static PyObject *decode_one(PyObject *item) {
    if (!PyUnicode_CheckExact(item) || !PyUnicode_IS_COMPACT_ASCII(item)) return NULL;
    return decode_span((const unsigned char *)PyUnicode_DATA(item), PyUnicode_GET_LENGTH(item));
}

static PyObject *b64decode_list(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyList_CheckExact(arg)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(arg);
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = decode_one(PyList_GET_ITEM(arg, i));
        if (b == NULL) {
            Py_DECREF(out);
            if (PyErr_Occurred()) return NULL; /* out of memory */
            Py_RETURN_NONE;
        }
        PyList_SET_ITEM(out, i, b);
    }
    return out;
}

/* produce_columns(body, max_records) -> (values, keys | None) | None
 *
 * The records of a binary-format v2 produce body read straight from its JSON text, when
 * the body is exactly {"records":[ROW, ...]} (JSON whitespace anywhere between tokens)
 * and every ROW is {"value":B64} or every ROW is {"key":B64,"value":B64} (either order),
 * each B64 a string of canonical standard base64 with no escape: no dict or str object
 * per record. None for anything else (another field, null, an escape, an empty or
 * longer-than-max_records list, a second "records", malformed JSON): the caller's
 * general parse then decides and names what is wrong. */
static const unsigned char *skip_ws(const unsigned char *p, const unsigned char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* p at '"': the token "name" followed by ':' ; returns past the ':' or NULL */
static const unsigned char *expect_name(const unsigned char *p, const unsigned char *end,
                                        const char *name, Py_ssize_t len) {
    if (end - p < len + 2 || p[0] != '"' || memcmp(p + 1, name, len) != 0 || p[len + 1] != '"')
        return NULL;
    p = skip_ws(p + len + 2, end);
    if (p >= end || *p != ':') return NULL;
    return skip_ws(p + 1, end);
}

/* p at '"': a base64 string; its decoded bytes in *out, returns past the closing quote,
 * or NULL (*out NULL; an exception set only on MemoryError) */
static const unsigned char *b64_string(const unsigned char *p, const unsigned char *end,
                                       PyObject **out) {
    *out = NULL;
    if (p >= end || *p != '"') return NULL;
    const unsigned char *start = ++p;
    /* an escape or any other text before the quote fails the decoding below */
    p = memchr(start, '"', (size_t)(end - start));
    if (p == NULL) return NULL;
    *out = decode_span(start, p - start);
    return *out == NULL ? NULL : p + 1;
}

/* p at a field of a row, "value":B64 or "key":B64, decoded into *v or *k (each at most
 * once per row); returns past it and the whitespace after, or NULL */
static const unsigned char *row_field(const unsigned char *p, const unsigned char *end,
                                      PyObject **v, PyObject **k) {
    const unsigned char *q;
    PyObject **slot;
    if ((q = expect_name(p, end, "value", 5)) != NULL) slot = v;
    else if ((q = expect_name(p, end, "key", 3)) != NULL) slot = k;
    else return NULL;
    if (*slot != NULL) return NULL; /* the same field twice */
    if ((p = b64_string(q, end, slot)) == NULL) return NULL;
    return skip_ws(p, end);
}

static PyObject *produce_columns(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    Py_ssize_t max_records;
    if (!PyArg_ParseTuple(args, "y*n", &buf, &max_records)) return NULL;
    const unsigned char *p = (const unsigned char *)buf.buf, *end = p + buf.len;
    PyObject *values = PyList_New(0), *keys = NULL, *v = NULL, *k = NULL;
    int keyed = -1; /* the shape of the first row decides: 0 value only, 1 key and value */
    if (values == NULL) goto fail;
    p = skip_ws(p, end);
    if (p >= end || *p != '{') goto none;
    p = skip_ws(p + 1, end);
    if ((p = expect_name(p, end, "records", 7)) == NULL) goto none;
    if (p >= end || *p != '[') goto none;
    p = skip_ws(p + 1, end);
    for (;;) {
        if (p >= end || *p != '{') goto none;
        p = skip_ws(p + 1, end);
        if ((p = row_field(p, end, &v, &k)) == NULL) goto none_or_fail;
        if (p < end && *p == ',' && (p = row_field(skip_ws(p + 1, end), end, &v, &k)) == NULL)
            goto none_or_fail;
        if (v == NULL) goto none; /* a key without a value */
        int row_keyed = k != NULL;
        if (p >= end || *p != '}') goto none;
        p = skip_ws(p + 1, end);
        if (keyed < 0) {
            keyed = row_keyed;
            if (keyed && (keys = PyList_New(0)) == NULL) goto fail;
        } else if (keyed != row_keyed) {
            goto none;
        }
        if (PyList_GET_SIZE(values) >= max_records) goto none;
        if (PyList_Append(values, v) < 0) goto fail;
        Py_CLEAR(v);
        if (keyed) {
            if (PyList_Append(keys, k) < 0) goto fail;
            Py_CLEAR(k);
        }
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        break;
    }
    if (p >= end || *p != ']') goto none;
    p = skip_ws(p + 1, end);
    if (p >= end || *p != '}') goto none;
    p = skip_ws(p + 1, end);
    if (p != end) goto none;
    PyBuffer_Release(&buf);
    if (keys == NULL) {
        Py_INCREF(Py_None);
        keys = Py_None;
    }
    return Py_BuildValue("(NN)", values, keys);
none_or_fail:
    if (PyErr_Occurred()) goto fail;
none:
    Py_XDECREF(v);
    Py_XDECREF(k);
    Py_XDECREF(values);
    Py_XDECREF(keys);
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(v);
    Py_XDECREF(k);
    Py_XDECREF(values);
    Py_XDECREF(keys);
    PyBuffer_Release(&buf);
    return NULL;
}

/* decimal digits of v (v >= 0) written at o; returns the end */
static char *write_int(char *o, long long v) {
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *o++ = '-';
    while (n) *o++ = tmp[--n];
    return o;
}

static const char OFFSET_HEAD[] = "{\"partition\":";
static const char OFFSET_MID[] = ",\"offset\":";
static const char OFFSET_TAIL[] = ",\"error_code\":null,\"error\":null}";

/* produce_offsets(partitions, offsets) -> bytes: the items of a v2 produce answer's
 * "offsets" array, comma-separated, for records that all succeeded:
 * {"partition":P,"offset":O,"error_code":null,"error":null} (the bytes orjson writes
 * for those dicts). Both lists of ints, equally long; TypeError otherwise. */
static PyObject *produce_offsets(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *parts, *offsets;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &parts, &PyList_Type, &offsets))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(parts);
    if (PyList_GET_SIZE(offsets) != n) {
        PyErr_SetString(PyExc_TypeError, "partitions and offsets differ in length");
        return NULL;
    }
    const Py_ssize_t fixed = sizeof(OFFSET_HEAD) - 1 + sizeof(OFFSET_MID) - 1 +
                             sizeof(OFFSET_TAIL) - 1 + 1 + 2 * 21;
    Py_ssize_t cap = n * fixed;
    PyObject *out = PyBytes_FromStringAndSize(NULL, cap > 0 ? cap : 1);
    if (out == NULL) return NULL;
    char *start = PyBytes_AS_STRING(out), *o = start;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(parts, i), *off = PyList_GET_ITEM(offsets, i);
        if (!PyLong_CheckExact(p) || !PyLong_CheckExact(off)) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "partitions and offsets must be ints");
            return NULL;
        }
        long long pv = PyLong_AsLongLong(p), ov = PyLong_AsLongLong(off);
        if ((pv == -1 || ov == -1) && PyErr_Occurred()) {
            Py_DECREF(out);
            return NULL;
        }
        if (i) *o++ = ',';
        memcpy(o, OFFSET_HEAD, sizeof(OFFSET_HEAD) - 1);
        o = write_int(o + sizeof(OFFSET_HEAD) - 1, pv);
        memcpy(o, OFFSET_MID, sizeof(OFFSET_MID) - 1);
        o = write_int(o + sizeof(OFFSET_MID) - 1, ov);
        memcpy(o, OFFSET_TAIL, sizeof(OFFSET_TAIL) - 1);
        o += sizeof(OFFSET_TAIL) - 1;
    }
    if (_PyBytes_Resize(&out, o - start) < 0) return NULL;
    return out;
}

/* produce_offsets_runs(total, runs) -> bytes | None: produce_offsets of a request spread
 * over several partitions, from its runs: (partition, first_offset, order), order the
 * input indexes appended to partition in log order from first_offset (a list or a
 * range). None unless the runs cover every index below total exactly once (failed
 * records: the caller's general path). */
static PyObject *produce_offsets_runs(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t total;
    PyObject *runs, *out = NULL;
    if (!PyArg_ParseTuple(args, "nO!", &total, &PyList_Type, &runs)) return NULL;
    if (total <= 0) Py_RETURN_NONE;
    long long *part = PyMem_Malloc(sizeof(long long) * 2 * (size_t)total);
    if (part == NULL) return PyErr_NoMemory();
    long long *off = part + total;
    for (Py_ssize_t i = 0; i < total; i++) part[i] = -1;
    Py_ssize_t filled = 0;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(runs); r++) {
        PyObject *run = PyList_GET_ITEM(runs, r);
        if (!PyTuple_CheckExact(run) || PyTuple_GET_SIZE(run) != 3) goto none;
        long long p = PyLong_AsLongLong(PyTuple_GET_ITEM(run, 0));
        long long first = PyLong_AsLongLong(PyTuple_GET_ITEM(run, 1));
        if (((p == -1 || first == -1) && PyErr_Occurred()) || p < 0) goto fail_or_none;
        PyObject *seq = PySequence_Fast(PyTuple_GET_ITEM(run, 2), "order is not a sequence");
        if (seq == NULL) goto fail_or_none;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t k = 0; k < n; k++) {
            Py_ssize_t i = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, k));
            if (i < 0 || i >= total || part[i] >= 0) { /* also an error from the int */
                Py_DECREF(seq);
                goto fail_or_none;
            }
            part[i] = p;
            off[i] = first + k;
        }
        filled += n;
        Py_DECREF(seq);
    }
    if (filled != total) goto none;
    const Py_ssize_t fixed = sizeof(OFFSET_HEAD) - 1 + sizeof(OFFSET_MID) - 1 +
                             sizeof(OFFSET_TAIL) - 1 + 1 + 2 * 21;
    out = PyBytes_FromStringAndSize(NULL, total * fixed);
    if (out == NULL) goto done;
    char *start = PyBytes_AS_STRING(out), *o = start;
    for (Py_ssize_t i = 0; i < total; i++) {
        if (i) *o++ = ',';
        memcpy(o, OFFSET_HEAD, sizeof(OFFSET_HEAD) - 1);
        o = write_int(o + sizeof(OFFSET_HEAD) - 1, part[i]);
        memcpy(o, OFFSET_MID, sizeof(OFFSET_MID) - 1);
        o = write_int(o + sizeof(OFFSET_MID) - 1, off[i]);
        memcpy(o, OFFSET_TAIL, sizeof(OFFSET_TAIL) - 1);
        o += sizeof(OFFSET_TAIL) - 1;
    }
    _PyBytes_Resize(&out, o - start); /* NULL and an exception on failure */
    goto done;
fail_or_none:
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) PyErr_Clear();
        else goto done;
    }
none:
    Py_INCREF(Py_None);
    out = Py_None;
done:
    PyMem_Free(part);
    return out;
}

/* produce_offsets_range(partition, first, count) -> bytes: produce_offsets for
 * `count` records appended to one partition at consecutive offsets from `first`. */
static PyObject *produce_offsets_range(PyObject *self, PyObject *args) {
    (void)self;
    long long partition, first;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "LLn", &partition, &first, &n)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative count");
        return NULL;
    }
    char head[48];
    char *h = head;
    memcpy(h, OFFSET_HEAD, sizeof(OFFSET_HEAD) - 1);
    h = write_int(h + sizeof(OFFSET_HEAD) - 1, partition);
    memcpy(h, OFFSET_MID, sizeof(OFFSET_MID) - 1);
    h += sizeof(OFFSET_MID) - 1;
    const Py_ssize_t head_len = h - head;
    const Py_ssize_t item = head_len + 21 + sizeof(OFFSET_TAIL) - 1 + 1;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n > 0 ? n * item : 1);
    if (out == NULL) return NULL;
    char *start = PyBytes_AS_STRING(out), *o = start;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) *o++ = ',';
        memcpy(o, head, head_len);
        o = write_int(o + head_len, first + i);
        memcpy(o, OFFSET_TAIL, sizeof(OFFSET_TAIL) - 1);
        o += sizeof(OFFSET_TAIL) - 1;
    }
    if (_PyBytes_Resize(&out, o - start) < 0) return NULL;
    return out;
}

static PyMethodDef methods[] = {
    {"produce_offsets_range", produce_offsets_range, METH_VARARGS,
     "produce_offsets_range(partition, first, count) -> bytes: produce_offsets for "
     "consecutive offsets of one partition."},
    {"produce_offsets_runs", produce_offsets_runs, METH_VARARGS,
     "produce_offsets_runs(total, runs) -> bytes | None: produce_offsets of a request "
     "spread over several partitions, from its runs."},
    {"produce_offsets", produce_offsets, METH_VARARGS,
     "produce_offsets(partitions, offsets) -> bytes: the comma-separated items of a v2 "
     "produce answer's offsets array for records that all succeeded."},
    {"produce_columns", produce_columns, METH_VARARGS,
     "produce_columns(body, max_records) -> (values, keys | None) | None: the records "
     "of a binary v2 produce body of the usual shape, read from its JSON text; None "
     "for any other body."},
    {"b64decode_list", b64decode_list, METH_O,
     "b64decode_list(items) -> list[bytes] | None: canonical standard base64 strings "
     "decoded; None if any item is not one."},
    {"render_records", render_records, METH_VARARGS,
     "render_records(records, count, base_offset, base_timestamp, log_append_time, head, "
     "mid[, lo, hi]) -> (text, ends) | None: JSON fragments of a v2 batch's records (of "
     "records lo..hi-1 when given) joined by commas, and the end of each (see the module "
     "source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "api._render",
    .m_doc = "The per-record loops of the REST API's hot paths, in C (see api.native_render).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__render(void) {
    init_b64_values();
#ifdef B64_AVX2
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2") && !getenv("FRANZ_NO_AVX2");
#endif
    return PyModule_Create(&module);
}

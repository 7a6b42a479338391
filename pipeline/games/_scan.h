/* Shared by the C producer paths of the built-in games: whitespace tokens over a block of
 * input, and the statuses of scan_chunk().
 *
 * A scanner accepts only what the Python reader accepts, and reads it the same way; for
 * anything else (a bad case, a sign or a huge number, a token over the size limit) it
 * answers SCAN_UNSURE and the producer reads the file with the Python reader, which names
 * the file, line and case of the error (or accepts what the scanner was unsure of).
 */
#ifndef GAMEBATCH_SCAN_H
#define GAMEBATCH_SCAN_H

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

enum { SCAN_CHUNK = 0, SCAN_MORE = 1, SCAN_UNSURE = 2 };

/* What bytes.split() splits on. */
static inline int scan_space(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* A block and where the scanner is in it; `final` when no byte follows the block. */
typedef struct {
    const unsigned char *buf;
    Py_ssize_t len, pos, max_token;
    int final;
} Scan;

#if defined(__SSE2__) && defined(__GNUC__)
#define FAST_SPACES 1

/* Bit i set where at[i] is whitespace (scan_space), for the 16 bytes at `at`. */
static inline unsigned space_mask16(const unsigned char *at) {
    const __m128i v = _mm_loadu_si128((const __m128i *)at);
    const __m128i c = _mm_sub_epi8(v, _mm_set1_epi8('\t')); /* tab..CR: 0..4 */
    const __m128i space = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')),
                                       _mm_cmpeq_epi8(_mm_min_epu8(c, _mm_set1_epi8(4)), c));
    return (unsigned)_mm_movemask_epi8(space);
}

/* The same for the 64 bytes at `at`. */
static inline uint64_t space_mask64(const unsigned char *at) {
    return (uint64_t)space_mask16(at) | (uint64_t)space_mask16(at + 16) << 16 |
           (uint64_t)space_mask16(at + 32) << 32 | (uint64_t)space_mask16(at + 48) << 48;
}

/* Where a long token that goes on at q ends: the first whitespace from q, 16 bytes at a time
 * (or the last place a whole 16 bytes fit: the caller reads on from there). Kept out of
 * scan_token, which stays small enough to be inlined for short tokens. */
static Py_ssize_t __attribute__((noinline)) long_token_end(const unsigned char *buf,
                                                             Py_ssize_t q, Py_ssize_t len) {
    for (; q + 16 <= len; q += 16) {
        unsigned found = space_mask16(buf + q);
        if (found) return q + __builtin_ctz(found);
    }
    return q;
}
#endif

/* The next token as [*start, *end): 1, or 0 when the block ends before a whole token (a
 * token touching the end of a block that is not final may go on in the next one), or -1
 * for a token longer than max_token. */
static inline int scan_token(Scan *s, Py_ssize_t *start, Py_ssize_t *end) {
    Py_ssize_t p = s->pos;
    while (p < s->len && scan_space(s->buf[p])) p++;
    Py_ssize_t q = p, near = s->len - p > 16 ? p + 16 : s->len;
    while (q < near && !scan_space(s->buf[q])) q++; /* short tokens: numbers, small boards */
#if defined(__SSE2__) && defined(__GNUC__)
    if (q == near) q = long_token_end(s->buf, q, s->len); /* a board's row, say */
#endif
    while (q < s->len && !scan_space(s->buf[q])) q++; /* the rest, if any */
    if (q == p || (q == s->len && !s->final)) return 0;
    if (q - p > s->max_token) return -1;
    *start = p;
    *end = q;
    s->pos = q;
    return 1;
}

/* A token of digits only (leading zeros accepted) with a value in [low, high]. */
static inline int scan_number(const unsigned char *t, Py_ssize_t n, int64_t low, int64_t high,
                              int64_t *value) {
    while (n > 1 && *t == '0') t++, n--;
    if (n > 18) return 0;
    int64_t v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') return 0;
        v = v * 10 + (t[i] - '0');
    }
    if (v < low || v > high) return 0;
    *value = v;
    return 1;
}

/* scan_chunk(block, pos, cases_left, target_work, max_cases, max_token, final, cases, work)
 * -> (status, pos, cases, work): reads cases from `pos` while the chunk (already holding
 * `cases` cases of `work` work) is below both limits and cases of the input are left.
 * SCAN_CHUNK: the chunk is full, or the input's cases are all read; SCAN_MORE: the block
 * ends inside a case (at `pos`); SCAN_UNSURE: the case at `pos` is for the Python reader.
 * `one_case` reads a case and its work: 1, 0 (the block ends first) or -1 (unsure). */
static PyObject *scan_chunk_with(PyObject *args, int (*one_case)(Scan *, int64_t *)) {
    Py_buffer view;
    Py_ssize_t pos, max_cases, max_token, cases;
    long long left, target, work;
    int final;
    if (!PyArg_ParseTuple(args, "y*nLLnnpnL", &view, &pos, &left, &target, &max_cases,
                          &max_token, &final, &cases, &work))
        return NULL;
    if (pos < 0 || pos > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pos is outside the block");
        return NULL;
    }
    Scan s = {view.buf, view.len, pos, max_token, final};
    int status = SCAN_CHUNK;
    Py_BEGIN_ALLOW_THREADS
    while (cases < max_cases && work < target && cases < left) {
        Py_ssize_t at = s.pos;
        int64_t w = 0;
        int got = one_case(&s, &w);
        if (got <= 0) {
            s.pos = at;
            status = got == 0 && !final ? SCAN_MORE : SCAN_UNSURE;
            break;
        }
        cases++;
        work += w;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("innL", status, s.pos, cases, work);
}

#endif

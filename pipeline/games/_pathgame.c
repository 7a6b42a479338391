/* The pathgame kernels in C: the producer's scan of boards in a block of input, and the
 * worker's solve of a chunk given as the bytes of its boards.
 *
 * One pass over a board's two rows checks it (only '.' and '#', equal lengths, no column
 * black in both rows, no black cells of different rows in neighbouring columns: each would
 * cut every path) and gathers what its Grundy value needs: where the first and the last black
 * columns are, how many columns are black, and how often consecutive black columns change
 * rows (see board_value() in games/pathgame.py for why that is enough).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_scan.h"

/* 0 for '.', 1 (top) or 2 (bottom) for '#', 4 for any other byte. */
static unsigned char TOP[256], BOTTOM[256];

typedef struct {
    Py_ssize_t first, last, blacks, changes;
} Board;

#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#define FAST_COLUMNS 1

/* Bits of the 16 columns at `row`: *black where '#', *valid where '.' or '#'. */
static inline void columns16(const unsigned char *row, unsigned *black, unsigned *valid) {
    __m128i v = _mm_loadu_si128((const __m128i *)row);
    __m128i hash = _mm_cmpeq_epi8(v, _mm_set1_epi8('#'));
    __m128i dot = _mm_cmpeq_epi8(v, _mm_set1_epi8('.'));
    *black = (unsigned)_mm_movemask_epi8(hash);
    *valid = (unsigned)_mm_movemask_epi8(_mm_or_si128(hash, dot));
}
#endif

/* What read_board gathers, column after column. */
typedef struct {
    Py_ssize_t first, last, blacks, changes;
    unsigned int before, black; /* the previous column's code, the last black one */
} Columns;

/* A black column at i of row code 1 (top) or 2 (bottom). */
static inline void black_at(Columns *c, Py_ssize_t i, unsigned int code) {
    if (c->first < 0) c->first = i;
    c->last = i;
    c->blacks++;
    c->changes += c->black && c->black != code;
    c->black = code;
}

#ifdef FAST_COLUMNS
/* Columns [0, w - w % 16) 16 at a time: 0 when the board is not valid, else 1. */
static int __attribute__((noinline)) read_blocks(const unsigned char *top,
                                                 const unsigned char *bottom, Py_ssize_t w,
                                                 Columns *c) {
    for (Py_ssize_t i = 0; i + 16 <= w; i += 16) {
        unsigned t, b, tv, bv;
        columns16(top + i, &t, &tv);
        columns16(bottom + i, &b, &bv);
        unsigned up = t << 1 | (c->before & 1), down = b << 1 | (c->before >> 1);
        if ((tv & bv) != 0xFFFF || (t & b) || (t & down) || (b & up))
            return 0; /* a bad byte, a black column, or a cut path */
        for (unsigned m = t | b; m; m &= m - 1) {
            int j = __builtin_ctz(m);
            black_at(c, i + j, (t >> j & 1) ? 1 : 2);
        }
        c->before = (t >> 15 & 1) | (b >> 15 & 1) << 1;
    }
    return 1;
}
#endif

/* 1 when the rows make a valid board (then *b is filled in), else 0. Wide boards go 16
 * columns at a time (SSE2), the rest one by one. Inlined: tiny boards come by the million. */
static inline int read_board(const unsigned char *top, const unsigned char *bottom,
                             Py_ssize_t w, Board *b) {
    Py_ssize_t first = -1, last = -1, blacks = 0, changes = 0, i = 0;
    unsigned int before = 0, black = 0; /* the previous column's code, the last black one */
#ifdef FAST_COLUMNS
    if (w >= 16) {
        Columns c = {-1, -1, 0, 0, 0, 0};
        if (!read_blocks(top, bottom, w, &c)) return 0;
        first = c.first, last = c.last, blacks = c.blacks, changes = c.changes;
        before = c.before, black = c.black;
        i = w - w % 16;
    }
#endif
    for (; i < w; i++) {
        unsigned int code = TOP[top[i]] | BOTTOM[bottom[i]];
        if (code > 2 || (before ^ code) == 3) return 0; /* a bad byte, or a cut path */
        before = code;
        if (code) {
            if (first < 0) first = i;
            last = i;
            blacks++;
            changes += black && black != code;
            black = code;
        }
    }
    *b = (Board){first, last, blacks, changes};
    return 1;
}

#if defined(FAST_COLUMNS) && defined(FAST_SPACES)
#define SMALL_BOARD_BYTES 80 /* both rows within 64 bytes of the scan, and 16 more to load */

/* A valid board of at most 16 columns whose rows both end within the 64 bytes at s->pos
 * (SMALL_BOARD_BYTES readable): found and checked with bit masks, without a branch per
 * byte or column, the way tiny boards come by the million. 1 with its width and the bits of
 * its black cells per row (the scan moves past it); 0 for anything else, which the general
 * path reads (and judges). */
static inline int small_board(Scan *s, int *width, unsigned *top, unsigned *bottom) {
    const unsigned char *at = s->buf + s->pos;
    const uint64_t space = space_mask64(at), other = ~space;
    if (!other) return 0;
    const int t0 = __builtin_ctzll(other); /* the top row starts */
    if (!(space >> t0)) return 0;
    const int w = __builtin_ctzll(space >> t0), gap = t0 + w;
    if (!(other >> gap)) return 0;
    const int b0 = gap + __builtin_ctzll(other >> gap); /* the bottom row starts */
    if (!(space >> b0) || __builtin_ctzll(space >> b0) != w || w > 16 || w > s->max_token)
        return 0;
    const unsigned m = w == 16 ? 0xFFFFu : (1u << w) - 1;
    unsigned t, b, tv, bv;
    columns16(at + t0, &t, &tv);
    columns16(at + b0, &b, &bv);
    t &= m, b &= m;
    if ((tv & bv & m) != m || (t & b) || (t << 1 & b) || (b << 1 & t))
        return 0; /* a bad byte, a black column, or a cut path: as in read_board */
    *width = w, *top = t, *bottom = b;
    s->pos += b0 + w;
    return 1;
}
#endif

/* One board: 1, 0 (the block ends first), or -1 (not plainly valid). */
static int scan_case(Scan *s, int64_t *work) {
#ifdef SMALL_BOARD_BYTES
    int w;
    unsigned top, bottom;
    if (s->len - s->pos >= SMALL_BOARD_BYTES && small_board(s, &w, &top, &bottom)) {
        *work = (int64_t)w + 16; /* games/pathgame.py: work() */
        return 1;
    }
#endif
    Py_ssize_t t0, t1, b0, b1;
    int got = scan_token(s, &t0, &t1);
    if (got <= 0) return got;
    got = scan_token(s, &b0, &b1);
    if (got <= 0) return got;
    Board b;
    if (t1 - t0 != b1 - b0 || !read_board(s->buf + t0, s->buf + b0, t1 - t0, &b)) return -1;
    *work = (int64_t)(t1 - t0) + 16; /* games/pathgame.py: work() */
    return 1;
}

static PyObject *scan_chunk(PyObject *self, PyObject *args) {
    return scan_chunk_with(args, scan_case);
}

/* Grundy values of white runs (games/grundy.py): the tables up to their size, the closed
 * form beyond. */
typedef struct {
    const int32_t *open, *border;
    Py_ssize_t size;
} Tables;

static int64_t open_value(const Tables *g, Py_ssize_t w) {
    return w <= g->size ? g->open[w] : (w & 1);
}

static int64_t border_value(const Tables *g, Py_ssize_t w) {
    return w <= g->size ? g->border[w] : w;
}

/* The Grundy value of a board of width w whose first and last black columns are `first`
 * and `last`, `blacks` in all, with `changes` row changes between consecutive black columns
 * (only its parity counts: it is whether the first and the last black are in other rows). */
static int64_t board_value(const Tables *g, Py_ssize_t w, Py_ssize_t first, Py_ssize_t last,
                           Py_ssize_t blacks, Py_ssize_t changes) {
    if (first < 0) return open_value(g, w);
    return border_value(g, first) ^ border_value(g, w - 1 - last) ^
           ((last - first + 1 - blacks + changes) & 1);
}

/* The next board of a slice as its value: 1, or 0 when the slice holds no valid board next. */
static inline int next_value(Scan *s, const Tables *g, int64_t *value) {
#ifdef SMALL_BOARD_BYTES
    int w;
    unsigned top, bottom;
    if (s->len - s->pos >= SMALL_BOARD_BYTES && small_board(s, &w, &top, &bottom)) {
        const unsigned u = top | bottom;
        if (!u) {
            *value = open_value(g, w);
            return 1;
        }
        const int first = __builtin_ctz(u), last = 31 - __builtin_clz(u);
        *value = board_value(g, w, first, last, __builtin_popcount(u),
                             (top >> first ^ top >> last) & 1);
        return 1;
    }
#endif
    Py_ssize_t t0, t1, b0, b1;
    Board b;
    if (scan_token(s, &t0, &t1) != 1 || scan_token(s, &b0, &b1) != 1 || t1 - t0 != b1 - b0 ||
        !read_board(s->buf + t0, s->buf + b0, t1 - t0, &b))
        return 0;
    *value = board_value(g, t1 - t0, b.first, b.last, b.blacks, b.changes);
    return 1;
}

static PyObject *solve_slice(PyObject *self, PyObject *args) {
    Py_buffer view, open, border;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*ny*y*", &view, &count, &open, &border)) return NULL;
    PyObject *codes = NULL;
    if (open.len != border.len || open.len % 4 || open.len == 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "bad tables or count");
        goto done;
    }
    codes = PyBytes_FromStringAndSize(NULL, count);
    if (codes == NULL) goto done;
    char *out = PyBytes_AS_STRING(codes);
    Tables g = {open.buf, border.buf, open.len / 4 - 1};
    Scan s = {view.buf, view.len, 0, view.len, 1};
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t value;
        if (!next_value(&s, &g, &value)) {
            bad = i;
            break;
        }
        out[i] = value ? '0' : '1'; /* answer 0 (Snuke) when the first player wins */
    }
    if (bad < 0) {
        Py_ssize_t start, end;
        if (scan_token(&s, &start, &end) == 1) bad = count;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, bad < count ? "board %zd of the chunk is malformed"
                                                   : "more than %zd boards in the chunk", bad);
        Py_CLEAR(codes);
    }
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&open);
    PyBuffer_Release(&border);
    return codes;
}

static PyMethodDef methods[] = {
    {"scan_chunk", scan_chunk, METH_VARARGS,
     "scan_chunk(block, pos, cases_left, target_work, max_cases, max_token, final, cases, work)"
     " -> (status, pos, cases, work): boards from pos until the chunk is full"},
    {"solve_slice", solve_slice, METH_VARARGS,
     "solve_slice(boards, count, open_table, border_table) -> answer codes (int32 tables)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pathgame",
                                    "pathgame kernels in C", -1, methods};

PyMODINIT_FUNC PyInit__pathgame(void) {
    memset(TOP, 4, sizeof TOP);
    memset(BOTTOM, 4, sizeof BOTTOM);
    TOP['.'] = BOTTOM['.'] = 0;
    TOP['#'] = 1;
    BOTTOM['#'] = 2;
    return PyModule_Create(&module);
}

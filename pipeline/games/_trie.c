/* The strgame kernel in C: outcomes of the first mover on the trie of a set of strings,
 * found by splitting the strings by their letters (an MSD radix walk) without building the
 * trie; and the producer's scan and the worker's solve of cases given as input bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_scan.h"

typedef struct {
    const char *s;
    Py_ssize_t n;
} Word;

/* --- the radix solver: the trie is never built -----------------------------------------
 *
 * A node's words are split by their next letter, each letter being a child. A child where
 * every word ends is a leaf, and a child that one word goes past is a chain down to a leaf:
 * both are answered at once, from one counting pass. Only the words of the other children
 * are scattered into buckets (a second pass), and those children are visited one after
 * another with an explicit stack. A node with one child passes on its child's outcome
 * flipped, without a frame, and skips the letters all its words share. The visit of a node
 * stops as soon as it can both win and lose: nothing below can change that. Outcomes are
 * bits: 1 the mover can force a win, 2 can force a loss (a leaf: 2). */

typedef struct {
    Py_ssize_t end[26]; /* bucket c holds words [c ? end[c - 1] : begin, end[c]) */
    Py_ssize_t begin, depth;
    int letter;         /* the next bucket to visit */
    int flips;          /* 1: an odd number of single-child edges lead from where the node was
                         * entered down to it */
    int seen;           /* 1: a child lost for its mover, 2: a child won for its mover */
} Frame;

typedef struct {
    Word *tmp; /* room to scatter a node's words into */
    Frame *frames;
    Py_ssize_t frames_room;
} Radix;

/* The outcome of a chain of `edges` single-child edges down to a leaf. */
static inline int chain_bits(Py_ssize_t edges) { return edges & 1 ? 1 : 2; }

/* Of a node with one child, whose words are [lo, *hi) at `depth`: drop the words that end
 * here (prefixes of the others) and return how many letters all the others share from
 * there (the child's one at least). */
static Py_ssize_t one_child(Word *w, Py_ssize_t lo, Py_ssize_t *hi, Py_ssize_t depth) {
    Py_ssize_t j = lo;
    for (Py_ssize_t i = lo; i < *hi; i++)
        if (w[i].n > depth) w[j++] = w[i];
    *hi = j;
    const Word *first = &w[lo];
    Py_ssize_t shared = first->n - depth;
    for (Py_ssize_t i = lo + 1; i < j && shared > 0; i++) {
        Py_ssize_t k = 0, most = w[i].n - depth < shared ? w[i].n - depth : shared;
        while (k < most && w[i].s[depth + k] == first->s[depth + k]) k++;
        shared = k;
    }
    return shared;
}

static int push_frame(Radix *r, Py_ssize_t *top) {
    if (*top < r->frames_room) return 0;
    Py_ssize_t room = r->frames_room ? 2 * r->frames_room : 64;
    Frame *more = realloc(r->frames, sizeof(Frame) * (size_t)room);
    if (!more) return -1;
    r->frames = more;
    r->frames_room = room;
    return 0;
}

/* Enter the node of words [lo, hi) at `depth`: its outcome (bits), or -1 when a frame was
 * pushed for its children, or -2 when out of memory. */
static int radix_enter(Radix *r, Word *w, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t depth,
                       Py_ssize_t *top) {
    int flips = 0;
    for (;;) {
        if (hi - lo == 1) return chain_bits(w[lo].n - depth) ^ (flips ? 3 : 0);
        Py_ssize_t longer[26] = {0}, last[26]; /* words going past the child; the last one */
        uint32_t present = 0;
        for (Py_ssize_t i = lo; i < hi; i++) {
            Py_ssize_t left = w[i].n - depth;
            if (left <= 0) continue;
            int c = (unsigned char)w[i].s[depth] - 'a';
            present |= 1u << c;
            if (left > 1) longer[c]++, last[c] = i;
        }
        if (present == 0) return 2 ^ (flips ? 3 : 0); /* every word ends here: a leaf */
        if ((present & (present - 1)) == 0) {
            Py_ssize_t shared = one_child(w, lo, &hi, depth); /* one letter at least */
            depth += shared;
            flips ^= (int)(shared & 1);
            continue;
        }
        int seen = 0, big = 0;
        for (int c = 0; c < 26; c++) {
            if (!(present >> c & 1) || longer[c] > 1) {
                big |= longer[c] > 1;
                continue;
            }
            int child = longer[c] ? chain_bits(w[last[c]].n - depth - 1) : 2;
            seen |= child ^ 3;
        }
        if (seen == 3 || !big) return seen ^ (flips ? 3 : 0);
        if (push_frame(r, top) < 0) return -2;
        Py_ssize_t at[26]; /* where the next word of letter c goes; then its bucket's end */
        at[0] = lo;
        for (int c = 1; c < 26; c++) at[c] = at[c - 1] + (longer[c - 1] > 1 ? longer[c - 1] : 0);
        for (Py_ssize_t i = lo; i < hi; i++) {
            if (w[i].n - depth <= 1) continue;
            int c = (unsigned char)w[i].s[depth] - 'a';
            if (longer[c] > 1) r->tmp[at[c]++] = w[i];
        }
        memcpy(w + lo, r->tmp + lo, sizeof(Word) * (size_t)(at[25] - lo));
        Frame *f = &r->frames[(*top)++];
        *f = (Frame){.begin = lo, .depth = depth, .letter = 0, .flips = flips, .seen = seen};
        memcpy(f->end, at, sizeof f->end);
        return -1;
    }
}

/* can_win | can_lose << 1 of the words' trie; `tmp` has room for n words; -1 when out of
 * memory. */
static int solve_radix(Radix *r, Word *w, Py_ssize_t n) {
    Py_ssize_t top = 0;
    int bits = radix_enter(r, w, 0, n, 0, &top);
    for (;;) {
        if (bits == -2) return -1;
        if (bits >= 0) {
            if (top == 0) return bits;
            r->frames[top - 1].seen |= bits ^ 3;
        }
        Frame *f = &r->frames[top - 1];
        Py_ssize_t start = f->letter ? f->end[f->letter - 1] : f->begin;
        while (f->letter < 26 && f->end[f->letter] == start) f->letter++;
        if (f->seen == 3 || f->letter == 26) { /* done: nothing below changes it now */
            bits = f->seen ^ (f->flips ? 3 : 0);
            top--;
            continue;
        }
        Py_ssize_t stop = f->end[f->letter++]; /* two words or more */
        bits = radix_enter(r, w, start, stop, f->depth + 1, &top);
    }
}

static PyObject *outcomes(PyObject *self, PyObject *arg) {
    Py_ssize_t len;
    const char *text = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, &len) : NULL;
    if (text == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "outcomes() takes a str");
        return NULL;
    }
    if (len == 0) {
        PyErr_SetString(PyExc_ValueError, "no strings");
        return NULL;
    }
    int bad = 0;
    for (Py_ssize_t i = 0; i < len; i++)
        bad |= (text[i] < 'a' || text[i] > 'z') && text[i] != ' ';
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "strings must be lowercase letters a-z");
        return NULL;
    }
    Py_ssize_t n = 1;
    for (const char *p = memchr(text, ' ', (size_t)len); p;
         p = memchr(p + 1, ' ', (size_t)(text + len - p - 1)))
        n++;
    Word *w = PyMem_RawMalloc(sizeof(Word) * (size_t)n);
    Radix r = {PyMem_RawMalloc(sizeof(Word) * (size_t)n), NULL, 0};
    if (w == NULL || r.tmp == NULL) {
        PyMem_RawFree(w);
        PyMem_RawFree(r.tmp);
        return PyErr_NoMemory();
    }
    const char *start = text, *end = text + len;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *nl = memchr(start, ' ', (size_t)(end - start));
        const char *stop = nl ? nl : end;
        w[i].s = start;
        w[i].n = stop - start;
        start = stop + 1;
    }
    int result;
    Py_BEGIN_ALLOW_THREADS
    result = solve_radix(&r, w, n);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(w);
    PyMem_RawFree(r.tmp);
    free(r.frames);
    if (result < 0) return PyErr_NoMemory();
    return PyLong_FromLong(result);
}

/* --- the producer's scan and the worker's solve of strgame cases given as input bytes ---- */

#define MAX_STRINGS 1000000000000LL /* games/strgame.py */
#define MAX_K 1000000000LL

/* The next string of lowercase letters, checked as it is found (one pass): 1; 0 when the
 * block ends first (a string touching the end of a block that is not final may go on); -1
 * for any other byte in it, or a string over max_token. */
static inline int scan_word(Scan *s, Py_ssize_t *start, Py_ssize_t *end) {
    const unsigned char *b = s->buf;
    Py_ssize_t p = s->pos, len = s->len;
    while (p < len && scan_space(b[p])) p++;
    Py_ssize_t q = p;
#if defined(__SSE2__) && defined(__GNUC__)
    const __m128i a = _mm_set1_epi8('a'), z = _mm_set1_epi8(25); /* long strings: 16 at once */
    for (; q + 16 <= len; q += 16) {
        __m128i off = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(b + q)), a);
        unsigned letters = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(off, z), off));
        if (letters != 0xFFFF) {
            q += __builtin_ctz(~letters);
            break;
        }
    }
#endif
    while (q < len && (unsigned char)(b[q] - 'a') < 26) q++; /* the rest */
    if (q < len && !scan_space(b[q])) return -1;
    if (q == p || (q == len && !s->final)) return 0;
    if (q - p > s->max_token) return -1;
    *start = p;
    *end = q;
    s->pos = q;
    return 1;
}

/* Whole 64-byte blocks of strings at a time (SSE2): the strings of a case are mostly read
 * here, the last one or two and anything unusual by scan_word. A block is taken only when it
 * holds nothing but letters and whitespace and fewer string starts than remain; the scan
 * stops at a string's start (never inside one), so scan_word goes on from there. */
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#define FAST_WORDS 1

/* Bit i of *letters: byte i is a-z; of *spaces: byte i is whitespace (scan_space). */
static inline void classify64(const unsigned char *p, uint64_t *letters, uint64_t *spaces) {
    const __m128i a = _mm_set1_epi8('a'), z = _mm_set1_epi8(25);
    const __m128i tab = _mm_set1_epi8('\t'), cr = _mm_set1_epi8('\r' - '\t');
    const __m128i blank = _mm_set1_epi8(' ');
    uint64_t l = 0, sp = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * i));
        __m128i off = _mm_sub_epi8(v, a), ctl = _mm_sub_epi8(v, tab);
        __m128i is_letter = _mm_cmpeq_epi8(_mm_min_epu8(off, z), off);
        __m128i is_space = _mm_or_si128(_mm_cmpeq_epi8(v, blank),
                                        _mm_cmpeq_epi8(_mm_min_epu8(ctl, cr), ctl));
        l |= (uint64_t)(uint16_t)_mm_movemask_epi8(is_letter) << (16 * i);
        sp |= (uint64_t)(uint16_t)_mm_movemask_epi8(is_space) << (16 * i);
    }
    *letters = l;
    *spaces = sp;
}

/* Where the strings of a case are passed in blocks: s->pos, the strings passed, and for
 * each a start and an end when `w` is given (it has room for `n`). */
typedef struct {
    Py_ssize_t pos;
    int64_t passed, letters;
} Passed;

/* Pass whole blocks of the `n` strings that start at s->pos (which is not inside one). */
static Passed pass_blocks(const Scan *s, int64_t n, Word *w) {
    const unsigned char *b = s->buf;
    Py_ssize_t p = s->pos, open = p; /* open: where the string running into p starts */
    int64_t passed = 0, letters = 0;
    uint64_t carry = 0;               /* 1: the byte before p is a letter */
    while (p + 64 <= s->len && s->max_token >= 64) {
        uint64_t l, sp;
        classify64(b + p, &l, &sp);
        uint64_t starts = l & ~(l << 1 | carry);
        int count = __builtin_popcountll(starts);
        if (~(l | sp) || passed + count >= n || (carry && p + 64 - open > s->max_token))
            break; /* the scalar scan judges it, or ends the last string */
        if (w) {
            uint64_t ends = ~l & (l << 1 | carry); /* a string ends before bit i */
            int64_t k = passed;
            for (uint64_t m = starts; m; m &= m - 1)
                w[k++].s = (const char *)b + p + __builtin_ctzll(m);
            k = passed - (int64_t)carry;
            for (uint64_t m = ends; m; m &= m - 1, k++)
                w[k].n = (const char *)b + p + __builtin_ctzll(m) - w[k].s;
        }
        if (starts) open = p + 63 - __builtin_clzll(starts);
        passed += count;
        letters += __builtin_popcountll(l);
        carry = l >> 63;
        p += 64;
    }
    if (carry) { /* give back the string running on: the scalar scan reads it whole */
        passed--;
        letters -= p - open;
        p = open;
    }
    return (Passed){p, passed, letters};
}
#endif

/* `n K`: 1, 0 (the block ends first) or -1 (not plainly valid). */
static int scan_head(Scan *s, int64_t *n, int64_t *k) {
    Py_ssize_t a, b;
    int got = scan_token(s, &a, &b);
    if (got <= 0) return got;
    if (!scan_number(s->buf + a, b - a, 1, MAX_STRINGS, n)) return -1;
    got = scan_token(s, &a, &b);
    if (got <= 0) return got;
    return scan_number(s->buf + a, b - a, 1, MAX_K, k) ? 1 : -1;
}

/* One case: `n K` and n strings of lowercase letters. */
static int scan_case(Scan *s, int64_t *work) {
    int64_t n, k, letters = 0, i = 0;
    int got = scan_head(s, &n, &k);
    if (got <= 0) return got;
#ifdef FAST_WORDS
    if (n > 8) { /* a case of a few strings is read faster one by one */
        Passed fast = pass_blocks(s, n, NULL);
        s->pos = fast.pos;
        i = fast.passed;
        letters = fast.letters;
    }
#endif
    for (; i < n; i++) {
        Py_ssize_t a, b;
        got = scan_word(s, &a, &b);
        if (got <= 0) return got;
        letters += b - a;
    }
    *work = letters + n; /* games/strgame.py: work(), the letters and the spaces, plus one */
    return 1;
}

static PyObject *scan_chunk(PyObject *self, PyObject *args) {
    return scan_chunk_with(args, scan_case);
}

/* The words of the case being solved, and the radix solver's room; both grow as needed. */
typedef struct {
    Word *w;
    Py_ssize_t room;
    Radix radix;
} Solving;

/* Room for `n` words in both arrays: 0, or -1 when out of memory. */
static int make_room(Solving *g, Py_ssize_t n) {
    if (n <= g->room) return 0;
    Py_ssize_t room = g->room * 2 > n ? g->room * 2 : n;
    Word *w = realloc(g->w, sizeof(Word) * (size_t)room);
    if (w) g->w = w;
    Word *tmp = realloc(g->radix.tmp, sizeof(Word) * (size_t)room);
    if (tmp) g->radix.tmp = tmp;
    if (!w || !tmp) return -1;
    g->room = room;
    return 0;
}

/* The answer code of one case ('0' Pure, '1' Dirty), or -1 for a malformed case, -2 when
 * out of memory. */
static int solve_one(Scan *s, Solving *g) {
    int64_t n, k;
    if (scan_head(s, &n, &k) != 1 || n > s->len) return -1; /* a string takes a byte at least */
    for (int64_t i = 0; i < n;) {
        if (i == g->room && make_room(g, i < 1024 ? 1024 : 2 * i) < 0) return -2;
#ifdef FAST_WORDS
        if (n - i > 8) {
            Passed fast = pass_blocks(s, (n < g->room ? n : g->room) - i, g->w + i);
            s->pos = fast.pos;
            i += fast.passed; /* still below n and the room */
        }
#endif
        Py_ssize_t a, b;
        if (scan_word(s, &a, &b) != 1) return -1;
        g->w[i++] = (Word){(const char *)s->buf + a, b - a};
    }
    int bits = solve_radix(&g->radix, g->w, n);
    if (bits < 0) return -2;
    int can_win = bits & 1, can_lose = bits >> 1 & 1;
    return can_win && (can_lose || k % 2 == 1) ? '0' : '1';
}

static PyObject *solve_slice(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count)) return NULL;
    PyObject *codes = count >= 0 ? PyBytes_FromStringAndSize(NULL, count) : NULL;
    if (codes == NULL) {
        PyBuffer_Release(&view);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a negative count");
        return NULL;
    }
    char *out = PyBytes_AS_STRING(codes);
    Scan s = {view.buf, view.len, 0, view.len, 1};
    Solving g = {NULL, 0, {NULL, NULL, 0}};
    Py_ssize_t at = 0;
    int code = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; at < count; at++) {
        code = solve_one(&s, &g);
        if (code < 0) break;
        out[at] = (char)code;
    }
    if (code >= 0) {
        Py_ssize_t a, b;
        if (scan_token(&s, &a, &b) == 1) code = -3;
    }
    Py_END_ALLOW_THREADS
    free(g.w);
    free(g.radix.tmp);
    free(g.radix.frames);
    PyBuffer_Release(&view);
    if (code < 0) {
        Py_DECREF(codes);
        if (code == -2) return PyErr_NoMemory();
        PyErr_Format(PyExc_ValueError, code == -1 ? "case %zd of the chunk is malformed"
                                                  : "more than %zd cases in the chunk", at);
        return NULL;
    }
    return codes;
}

static PyMethodDef methods[] = {
    {"outcomes", outcomes, METH_O,
     "outcomes(strings joined by spaces) -> can_win | can_lose << 1"},
    {"scan_chunk", scan_chunk, METH_VARARGS,
     "scan_chunk(block, pos, cases_left, target_work, max_cases, max_token, final, cases, work)"
     " -> (status, pos, cases, work): cases from pos until the chunk is full"},
    {"solve_slice", solve_slice, METH_VARARGS,
     "solve_slice(cases, count) -> answer codes of cases given as input bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trie",
                                    "strgame kernel in C", -1, methods};

PyMODINIT_FUNC PyInit__trie(void) { return PyModule_Create(&module); }

/* The strgame kernel in C: outcomes of the first mover on the trie of a set of strings.
 *
 * Short strings (up to TRIE_LIMIT letters in all): a trie whose edges are kept in a hash
 * table; children are created after their parent, so one pass over the nodes from last to
 * first sees every child before its parent. Long strings, or too many letters for the trie's memory: the method of
 * games/strgame.py (first_player_outcomes): sort the strings, keep the leaves (strings that
 * are no prefix of the next one), and walk the compressed trie given by the common prefixes
 * of neighbouring leaves with an explicit stack. O(L log n). No recursion either way.
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

static int compare_words(const void *pa, const void *pb) {
    const Word *a = pa, *b = pb;
    Py_ssize_t m = a->n < b->n ? a->n : b->n;
    int c = memcmp(a->s, b->s, (size_t)m);
    if (c) return c;
    return (a->n > b->n) - (a->n < b->n);
}

static Py_ssize_t common_prefix(const Word *a, const Word *b) {
    Py_ssize_t m = a->n < b->n ? a->n : b->n, i = 0;
    while (i < m && a->s[i] == b->s[i]) i++;
    return i;
}

#define TRIE_LIMIT 1000000 /* letters; the trie takes 13 bytes per letter (16 at most) */
/* Above this mean length most trie nodes have one child, and sorting is faster (measured on
 * 2*10^5 random letters: the trie 2-5x faster at 4 letters a string, sorting 3x at 64). */
#define SORT_ABOVE_MEAN_LENGTH 20

enum { AUTO, TRIE, SORTED }; /* the method argument of outcomes() */

/* A trie node. Children are found through a hash table of (parent, letter): 13 bytes per
 * letter in all, where a table of 26 child slots per node takes 104. */
typedef struct {
    int32_t parent;
    unsigned char letter;
    unsigned char seen; /* bits: 1 a child lost for its mover, 2 a child won, 4 any child */
} Node;

static inline size_t slot_of(int32_t parent, unsigned char letter, size_t mask) {
    uint64_t key = (uint64_t)(uint32_t)parent << 8 | letter;
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
}

/* Both solvers return can_win | can_lose << 1, or -1 when out of memory. */
static int solve_trie(const Word *w, Py_ssize_t n, Py_ssize_t letters) {
    size_t size = 16;
    while (size < 2 * (size_t)(letters + 1)) size <<= 1; /* at most half full */
    Node *t = malloc(sizeof(Node) * (size_t)(letters + 1));
    int32_t *child = calloc(size, sizeof(int32_t)); /* 0: empty (the root is no child) */
    if (!t || !child) {
        free(t); free(child);
        return -1;
    }
    int32_t nodes = 1;
    t[0] = (Node){0, 0, 0};
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t node = 0;
        for (Py_ssize_t j = 0; j < w[i].n; j++) {
            unsigned char c = (unsigned char)w[i].s[j];
            size_t h = slot_of(node, c, size - 1);
            int32_t k;
            while ((k = child[h]) && (t[k].parent != node || t[k].letter != c))
                h = (h + 1) & (size - 1);
            if (!k) {
                k = child[h] = nodes++;
                t[k] = (Node){node, c, 0};
            }
            node = k;
        }
    }
    free(child);
    /* Children are created after their parent: from last to first, each node is complete
     * when reached, and hands its outcome to its parent. */
    int result = 0;
    for (int32_t v = nodes - 1; v >= 0; v--) {
        unsigned char seen = t[v].seen;
        int win = seen & 1, lose = (seen & 2) >> 1; /* moving to a child lost/won for it */
        int outcome = seen & 4 ? win | lose << 1 : 2; /* a leaf: the mover cannot move */
        if (v == 0) result = outcome;
        else t[t[v].parent].seen |= (unsigned char)(4 | !(outcome & 1) | !(outcome & 2) << 1);
    }
    free(t);
    return result;
}

static int solve_sorted(Word *w, Py_ssize_t n) {
    qsort(w, (size_t)n, sizeof(Word), compare_words);
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int prefix_of_next = i + 1 < n && w[i + 1].n >= w[i].n &&
                             memcmp(w[i].s, w[i + 1].s, (size_t)w[i].n) == 0;
        if (!prefix_of_next) w[m++] = w[i];
    }
    Py_ssize_t *depth = malloc(sizeof(Py_ssize_t) * (size_t)(m + 1));
    char *win = malloc((size_t)(m + 1)), *lose = malloc((size_t)(m + 1));
    if (!depth || !win || !lose) {
        free(depth); free(win); free(lose);
        return -1;
    }
    Py_ssize_t top = 0;
    depth[0] = 0; win[0] = 0; lose[0] = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_ssize_t split = i + 1 < m ? common_prefix(&w[i], &w[i + 1]) : 0;
        Py_ssize_t d = w[i].n;
        int cw = 0, cl = 1; /* at a leaf the mover cannot move */
        while (depth[top] > split) {
            int flip = (int)((d - depth[top] - 1) & 1);
            win[top] |= cw == flip;
            lose[top] |= cl == flip;
            d = depth[top]; cw = win[top]; cl = lose[top];
            top--;
        }
        int flip = (int)((d - split - 1) & 1);
        if (depth[top] == split) {
            win[top] |= cw == flip;
            lose[top] |= cl == flip;
        } else {
            top++;
            depth[top] = split; win[top] = cw == flip; lose[top] = cl == flip;
        }
    }
    int result = win[0] | (lose[0] << 1);
    free(depth); free(win); free(lose);
    return result;
}

static PyObject *outcomes(PyObject *self, PyObject *args) {
    PyObject *arg;
    int method = AUTO;
    if (!PyArg_ParseTuple(args, "U|i", &arg, &method)) return NULL;
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(arg, &len);
    if (text == NULL) return NULL;
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
    if (w == NULL) return PyErr_NoMemory();
    const char *start = text, *end = text + len;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *nl = memchr(start, ' ', (size_t)(end - start));
        const char *stop = nl ? nl : end;
        w[i].s = start;
        w[i].n = stop - start;
        start = stop + 1;
    }
    Py_ssize_t letters = len - (n - 1);
    if (method == AUTO)
        method = letters <= TRIE_LIMIT && letters <= SORT_ABOVE_MEAN_LENGTH * n ? TRIE : SORTED;
    int result;
    Py_BEGIN_ALLOW_THREADS
    result = method == TRIE ? solve_trie(w, n, letters) : solve_sorted(w, n);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(w);
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
    while (q < len && (unsigned char)(b[q] - 'a') < 26) q++;
    if (q < len && !scan_space(b[q])) return -1;
    if (q == p || (q == len && !s->final)) return 0;
    if (q - p > s->max_token) return -1;
    *start = p;
    *end = q;
    s->pos = q;
    return 1;
}

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
    int64_t n, k, letters = 0;
    int got = scan_head(s, &n, &k);
    if (got <= 0) return got;
    for (int64_t i = 0; i < n; i++) {
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

/* The answer code of one case ('0' Pure, '1' Dirty), or -1 for a malformed case, -2 when
 * out of memory. `w` grows as needed. */
static int solve_one(Scan *s, Word **w, Py_ssize_t *room) {
    int64_t n, k;
    if (scan_head(s, &n, &k) != 1 || n > s->len) return -1; /* a string takes a byte at least */
    if (n > *room) {
        Word *more = realloc(*w, sizeof(Word) * (size_t)n);
        if (!more) return -2;
        *w = more;
        *room = n;
    }
    Py_ssize_t letters = 0;
    for (int64_t i = 0; i < n; i++) {
        Py_ssize_t a, b;
        if (scan_word(s, &a, &b) != 1) return -1;
        (*w)[i] = (Word){(const char *)s->buf + a, b - a};
        letters += b - a;
    }
    int trie = letters <= TRIE_LIMIT && letters <= SORT_ABOVE_MEAN_LENGTH * n;
    int bits = trie ? solve_trie(*w, n, letters) : solve_sorted(*w, n);
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
    Word *w = NULL;
    Py_ssize_t room = 0, at = 0;
    int code = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; at < count; at++) {
        code = solve_one(&s, &w, &room);
        if (code < 0) break;
        out[at] = (char)code;
    }
    if (code >= 0) {
        Py_ssize_t a, b;
        if (scan_token(&s, &a, &b) == 1) code = -3;
    }
    Py_END_ALLOW_THREADS
    free(w);
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
    {"outcomes", outcomes, METH_VARARGS,
     "outcomes(strings joined by spaces, method=0) -> can_win | can_lose << 1\n"
     "method: 0 chooses, 1 the trie, 2 sorting (for tests)"},
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

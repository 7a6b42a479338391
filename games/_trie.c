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

static PyMethodDef methods[] = {
    {"outcomes", outcomes, METH_VARARGS,
     "outcomes(strings joined by spaces, method=0) -> can_win | can_lose << 1\n"
     "method: 0 chooses, 1 the trie, 2 sorting (for tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trie",
                                    "strgame kernel in C", -1, methods};

PyMODINIT_FUNC PyInit__trie(void) { return PyModule_Create(&module); }

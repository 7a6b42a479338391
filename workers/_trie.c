/* The strgame kernel in C: outcomes of the first mover on the trie of a set of strings.
 *
 * Short strings (up to TRIE_LIMIT letters in all): a plain 26-ary trie; children are created
 * after their parent, so one pass over the nodes from last to first sees every child before
 * its parent. Long strings, or too many letters for the trie's memory: the method of
 * workers/strgame.py (first_player_outcomes): sort the strings, keep the leaves (strings that
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

#define TRIE_LIMIT 1000000 /* letters; the trie takes 104 bytes per node */
/* Above this mean length most trie nodes have one child: sorting is faster (measured: 3x at
 * 16 letters, 25x at 64; the trie is faster below 8). */
#define SORT_ABOVE_MEAN_LENGTH 12

enum { AUTO, TRIE, SORTED }; /* the method argument of outcomes() */

/* Both solvers return can_win | can_lose << 1, or -1 when out of memory. */
static int solve_trie(const Word *w, Py_ssize_t n, Py_ssize_t letters) {
    int32_t *child = calloc((size_t)(letters + 1) * 26, sizeof(int32_t));
    unsigned char *outcome = malloc((size_t)(letters + 1));
    if (!child || !outcome) {
        free(child); free(outcome);
        return -1;
    }
    int32_t nodes = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t node = 0;
        for (Py_ssize_t j = 0; j < w[i].n; j++) {
            unsigned c = (unsigned char)w[i].s[j] - 'a'; /* checked by outcomes() */
            int32_t *slot = &child[(size_t)node * 26 + c];
            if (!*slot) *slot = nodes++;
            node = *slot;
        }
    }
    for (int32_t v = nodes - 1; v >= 0; v--) {
        int any = 0, win = 0, lose = 0;
        const int32_t *kids = &child[(size_t)v * 26];
        for (int c = 0; c < 26; c++) {
            if (kids[c]) {
                any = 1;
                win |= !(outcome[kids[c]] & 1);
                lose |= !(outcome[kids[c]] & 2);
            }
        }
        outcome[v] = any ? (unsigned char)(win | lose << 1) : 2; /* a leaf: lost to move */
    }
    int result = outcome[0];
    free(child); free(outcome);
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

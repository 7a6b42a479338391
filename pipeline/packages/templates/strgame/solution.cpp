// strgame: the trie of the strings, then for each node (children before parents) whether
// the player to move can force a win (canWin) and can force a loss (canLose) of a round.
#include <cstdio>
#include <cstring>
#include <vector>

int main() {
    int games;
    if (scanf("%d", &games) != 1) return 1;
    static char word[100005];
    while (games--) {
        int n;
        long long k;
        scanf("%d %lld", &n, &k);
        std::vector<int> child(26, -1);  // 26 slots a node
        int nodes = 1;
        for (int i = 0; i < n; i++) {
            scanf("%100004s", word);
            int at = 0;
            for (const char *c = word; *c; c++) {
                int slot = at * 26 + (*c - 'a');
                if (child[slot] < 0) {
                    child[slot] = nodes++;
                    child.resize(static_cast<size_t>(nodes) * 26, -1);
                }
                at = child[at * 26 + (*c - 'a')];
            }
        }
        std::vector<char> win(nodes), lose(nodes);
        for (int v = nodes - 1; v >= 0; v--) {  // children have larger numbers
            bool leaf = true, w = false, l = false;
            for (int c = 0; c < 26; c++) {
                int u = child[v * 26 + c];
                if (u < 0) continue;
                leaf = false;
                w = w || !win[u];
                l = l || !lose[u];
            }
            win[v] = w;
            lose[v] = leaf || l;
        }
        bool pure = win[0] && (lose[0] || k % 2 == 1);
        puts(pure ? "Pure" : "Dirty");
    }
    return 0;
}

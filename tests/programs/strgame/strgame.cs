using System;
using System.IO;
using System.Text;

public class Strgame {
    public static void Main() {
        var tokens = Console.In.ReadToEnd().Split(new[] {' ', '\n', '\r', '\t'}, StringSplitOptions.RemoveEmptyEntries);
        int at = 0;
        int t = int.Parse(tokens[at++]);
        var out_ = new StringBuilder();
        while (t-- > 0) {
            int n = int.Parse(tokens[at++]);
            long k = long.Parse(tokens[at++]);
            int[] next = new int[26 * 16];
            for (int i = 0; i < next.Length; i++) next[i] = -1;
            int nodes = 1;
            for (int i = 0; i < n; i++) {
                string w = tokens[at++];
                int v = 0;
                foreach (char ch in w) {
                    int c = ch - 'a';
                    if (next[v * 26 + c] < 0) {
                        if ((nodes + 1) * 26 > next.Length) {
                            int old = next.Length;
                            Array.Resize(ref next, old * 2);
                            for (int j = old; j < next.Length; j++) next[j] = -1;
                        }
                        next[v * 26 + c] = nodes++;
                    }
                    v = next[v * 26 + c];
                }
            }
            var win = new bool[nodes];
            var lose = new bool[nodes];
            for (int v = nodes - 1; v >= 0; v--) {
                bool leaf = true, wn = false, l = false;
                for (int c = 0; c < 26; c++) {
                    int u = next[v * 26 + c];
                    if (u < 0) continue;
                    leaf = false; wn |= !win[u]; l |= !lose[u];
                }
                win[v] = wn; lose[v] = leaf || l;
            }
            out_.Append(win[0] && (lose[0] || k % 2 == 1) ? "Pure\n" : "Dirty\n");
        }
        Console.Out.Write(out_.ToString());
    }
}

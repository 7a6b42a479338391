import java.io.*;
import java.util.*;

public class Strgame {
    static DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));

    static String token() throws IOException {
        StringBuilder b = new StringBuilder();
        int c = in.read();
        while (c == ' ' || c == '\n' || c == '\r' || c == '\t') c = in.read();
        while (c > ' ') { b.append((char) c); c = in.read(); }
        return b.toString();
    }

    public static void main(String[] args) throws IOException {
        int t = Integer.parseInt(token());
        StringBuilder out = new StringBuilder();
        while (t-- > 0) {
            int n = Integer.parseInt(token());
            long k = Long.parseLong(token());
            int[] next = new int[26 * 16];
            Arrays.fill(next, -1);
            int nodes = 1;
            for (int i = 0; i < n; i++) {
                String w = token();
                int at = 0;
                for (int j = 0; j < w.length(); j++) {
                    int c = w.charAt(j) - 'a';
                    if (next[at * 26 + c] < 0) {
                        if ((nodes + 1) * 26 > next.length) {
                            int old = next.length;
                            next = Arrays.copyOf(next, old * 2);
                            Arrays.fill(next, old, next.length, -1);
                        }
                        next[at * 26 + c] = nodes++;
                    }
                    at = next[at * 26 + c];
                }
            }
            boolean[] win = new boolean[nodes], lose = new boolean[nodes];
            for (int v = nodes - 1; v >= 0; v--) {
                boolean leaf = true, w = false, l = false;
                for (int c = 0; c < 26; c++) {
                    int u = next[v * 26 + c];
                    if (u < 0) continue;
                    leaf = false;
                    w |= !win[u];
                    l |= !lose[u];
                }
                win[v] = w;
                lose[v] = leaf || l;
            }
            boolean pure = win[0] && (lose[0] || k % 2 == 1);
            out.append(pure ? "Pure" : "Dirty").append('\n');
        }
        System.out.print(out);
    }
}

// Holds MEGABYTES of live heap (the first line of the source names it), then answers.
import java.io.*;
import java.util.*;

public class Heap {
    static final int MEGABYTES = 60;

    public static void main(String[] args) throws IOException {
        List<long[]> held = new ArrayList<>();
        for (int i = 0; i < MEGABYTES; i++) {
            long[] block = new long[1 << 17];  // 1 MiB
            Arrays.fill(block, i);
            held.add(block);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        int t = Integer.parseInt(in.readLine().trim());
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < t; i++) out.append(held.size() == MEGABYTES ? "Pure" : "Dirty").append('\n');
        System.out.print(out);
    }
}

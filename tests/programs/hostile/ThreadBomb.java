// Starts threads until the sandbox refuses one: Pure when it was refused before 1,000.
import java.io.*;

public class ThreadBomb {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        int t = Integer.parseInt(in.readLine().trim());
        int started = 0;
        try {
            for (; started < 1000; started++) {
                Thread th = new Thread(() -> {
                    try { Thread.sleep(60_000); } catch (InterruptedException e) { }
                });
                th.setDaemon(true);
                th.start();
            }
        } catch (Throwable e) { }
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < t; i++) out.append(started < 1000 ? "Pure" : "Dirty").append('\n');
        System.out.print(out);
        System.out.flush();
        System.exit(0);
    }
}

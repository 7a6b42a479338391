// Tries to leave the sandbox from the JVM: a file outside the box, the machine's network, the
// box itself written, and a process started that should not outlive the run. Prints Pure for
// each case when every escape failed, Dirty when one worked.
import java.io.*;
import java.net.*;
import java.nio.file.*;

public class Escape {
    static boolean escaped() {
        try { Files.readAllBytes(Paths.get("/etc/shadow")); return true; } catch (Exception e) { }
        try { Files.write(Paths.get("/box/planted"), new byte[] {1}); return true; } catch (Exception e) { }
        for (String host : new String[] {"127.0.0.1", "10.0.0.1", "1.1.1.1"}) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(host, 6379), 300);
                return true;
            } catch (Exception e) { }
        }
        try {
            // a child that would sleep for ten minutes: the run's end must end it
            new ProcessBuilder("/bin/sh", "-c", "sleep 600 &").start().waitFor();
        } catch (Exception e) { }
        return false;
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        int t = Integer.parseInt(in.readLine().trim());
        String word = escaped() ? "Dirty" : "Pure";
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < t; i++) out.append(word).append('\n');
        System.out.print(out);
    }
}

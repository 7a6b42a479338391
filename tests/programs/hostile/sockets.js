// Opens sockets to the machine's Redis and to the world, and spawns processes until refused:
// Pure when no socket connected and the spawning was held.
const net = require("net");
const { spawn } = require("child_process");
const t = parseInt(require("fs").readFileSync(0, "latin1").split(/\s+/)[0], 10);

function attempt(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 300 });
    socket.on("connect", () => { socket.destroy(); resolve(true); });
    socket.on("error", () => resolve(false));
    socket.on("timeout", () => { socket.destroy(); resolve(false); });
  });
}

(async () => {
  let escaped = (await attempt("127.0.0.1", 6379)) || (await attempt("1.1.1.1", 53));
  let started = 0;
  for (; started < 500; started++) {
    const ok = await new Promise((resolve) => {
      const child = spawn("/bin/sleep", ["600"], { detached: true, stdio: "ignore" });
      child.on("spawn", () => { child.unref(); resolve(true); });
      child.on("error", () => resolve(false));
    });
    if (!ok) break;
  }
  escaped = escaped || started >= 500;
  process.stdout.write((escaped ? "Dirty\n" : "Pure\n").repeat(t));
  process.exit(0);
})();

const data = require("fs").readFileSync(0, "latin1").split(/\s+/).filter((s) => s.length > 0);
let at = 0;
let t = parseInt(data[at++], 10);
const out = [];
while (t-- > 0) {
  const n = parseInt(data[at++], 10);
  const k = BigInt(data[at++]);
  let next = new Int32Array(26 * 16).fill(-1);
  let nodes = 1;
  for (let i = 0; i < n; i++) {
    const w = data[at++];
    let v = 0;
    for (let j = 0; j < w.length; j++) {
      const c = w.charCodeAt(j) - 97;
      if (next[v * 26 + c] < 0) {
        if ((nodes + 1) * 26 > next.length) {
          const grown = new Int32Array(next.length * 2).fill(-1);
          grown.set(next);
          next = grown;
        }
        next[v * 26 + c] = nodes++;
      }
      v = next[v * 26 + c];
    }
  }
  const win = new Uint8Array(nodes), lose = new Uint8Array(nodes);
  for (let v = nodes - 1; v >= 0; v--) {
    let leaf = true, w = false, l = false;
    for (let c = 0; c < 26; c++) {
      const u = next[v * 26 + c];
      if (u < 0) continue;
      leaf = false;
      w = w || !win[u];
      l = l || !lose[u];
    }
    win[v] = w ? 1 : 0;
    lose[v] = leaf || l ? 1 : 0;
  }
  out.push(win[0] && (lose[0] || k % 2n === 1n) ? "Pure" : "Dirty");
}
process.stdout.write(out.join("\n") + "\n");

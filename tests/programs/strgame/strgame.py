import sys

data = sys.stdin.read().split()
t, at, out = int(data[0]), 1, []
for _ in range(t):
    n, k = int(data[at]), int(data[at + 1])
    words, at = data[at + 2 : at + 2 + n], at + 2 + n
    nxt = [{}]
    for word in words:
        v = 0
        for c in word:
            if c not in nxt[v]:
                nxt[v][c] = len(nxt)
                nxt.append({})
            v = nxt[v][c]
    win, lose = [False] * len(nxt), [False] * len(nxt)
    for v in range(len(nxt) - 1, -1, -1):
        kids = nxt[v].values()
        win[v] = any(not win[c] for c in kids)
        lose[v] = not kids or any(not lose[c] for c in kids)
    out.append("Pure" if win[0] and (lose[0] or k % 2 == 1) else "Dirty")
print("\n".join(out))

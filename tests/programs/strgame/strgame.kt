import java.io.*

fun main() {
    val tokens = BufferedReader(InputStreamReader(System.`in`)).readText().split(Regex("\\s+")).filter { it.isNotEmpty() }
    var at = 0
    var t = tokens[at++].toInt()
    val out = StringBuilder()
    while (t-- > 0) {
        val n = tokens[at++].toInt()
        val k = tokens[at++].toLong()
        var next = IntArray(26 * 16) { -1 }
        var nodes = 1
        repeat(n) {
            val w = tokens[at++]
            var v = 0
            for (ch in w) {
                val c = ch - 'a'
                if (next[v * 26 + c] < 0) {
                    if ((nodes + 1) * 26 > next.size) {
                        val old = next.size
                        next = next.copyOf(old * 2)
                        for (i in old until next.size) next[i] = -1
                    }
                    next[v * 26 + c] = nodes++
                }
                v = next[v * 26 + c]
            }
        }
        val win = BooleanArray(nodes)
        val lose = BooleanArray(nodes)
        for (v in nodes - 1 downTo 0) {
            var leaf = true; var w = false; var l = false
            for (c in 0 until 26) {
                val u = next[v * 26 + c]
                if (u < 0) continue
                leaf = false; w = w || !win[u]; l = l || !lose[u]
            }
            win[v] = w; lose[v] = leaf || l
        }
        out.append(if (win[0] && (lose[0] || k % 2 == 1L)) "Pure" else "Dirty").append('\n')
    }
    print(out)
}

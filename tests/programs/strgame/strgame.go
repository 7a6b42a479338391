package main

import (
	"bufio"
	"os"
	"strconv"
)

func main() {
	sc := bufio.NewScanner(bufio.NewReaderSize(os.Stdin, 1<<16))
	sc.Buffer(make([]byte, 1<<20), 1<<21)
	sc.Split(bufio.ScanWords)
	next := func() string { sc.Scan(); return sc.Text() }
	t, _ := strconv.Atoi(next())
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for ; t > 0; t-- {
		n, _ := strconv.Atoi(next())
		k, _ := strconv.ParseInt(next(), 10, 64)
		trie := [][26]int32{}
		blank := [26]int32{}
		for i := range blank {
			blank[i] = -1
		}
		trie = append(trie, blank)
		for i := 0; i < n; i++ {
			word := next()
			at := 0
			for j := 0; j < len(word); j++ {
				c := word[j] - 'a'
				if trie[at][c] < 0 {
					trie[at][c] = int32(len(trie))
					trie = append(trie, blank)
				}
				at = int(trie[at][c])
			}
		}
		win := make([]bool, len(trie))
		lose := make([]bool, len(trie))
		for v := len(trie) - 1; v >= 0; v-- {
			leaf, wn, ls := true, false, false
			for _, u := range trie[v] {
				if u < 0 {
					continue
				}
				leaf = false
				wn = wn || !win[u]
				ls = ls || !lose[u]
			}
			win[v] = wn
			lose[v] = leaf || ls
		}
		if win[0] && (lose[0] || k%2 == 1) {
			w.WriteString("Pure\n")
		} else {
			w.WriteString("Dirty\n")
		}
	}
}

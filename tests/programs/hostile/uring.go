// Calls io_uring_setup through the syscall package (Go's runtime bypasses the C library),
// reaches for the machine's network and starts processes until refused: Pure when every one
// of those failed or was held.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
	"unsafe"
)

func escaped() bool {
	var params [120]byte
	fd, _, errno := syscall.Syscall(425, 4, uintptr(unsafe.Pointer(&params[0])), 0)
	if errno == 0 && int(fd) >= 0 {
		return true
	}
	for _, host := range []string{"127.0.0.1:6379", "1.1.1.1:53"} {
		if c, err := net.DialTimeout("tcp", host, 300*time.Millisecond); err == nil {
			c.Close()
			return true
		}
	}
	started := 0
	for ; started < 500; started++ {
		if err := exec.Command("/bin/sleep", "600").Start(); err != nil {
			break
		}
	}
	return started >= 500
}

func main() {
	in := bufio.NewReader(os.Stdin)
	var t int
	fmt.Fscan(in, &t)
	word := "Pure"
	if escaped() {
		word = "Dirty"
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i := 0; i < t; i++ {
		fmt.Fprintln(out, word)
	}
}

package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lo and hi bound the ports FreePorts tries when the kernel's ephemeral
// range starts above them (Linux's default starts at 32768).
const lo, hi = 20000, 32000

// ephemeralStart returns the first port of the kernel's ephemeral range,
// or 0 where it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}

// FreePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago, chosen at random below the ephemeral range. Where that range leaves
// too little room below it (or cannot be read), the kernel picks them.
func FreePorts(n int) ([]int, error) {
	top := hi
	if e := ephemeralStart(); e > 0 && e-1 < top {
		top = e - 1
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		addr := "127.0.0.1:0"
		if top-lo > 100 {
			addr = "127.0.0.1:" + strconv.Itoa(lo+rand.IntN(top-lo))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("loopback: found only %d free ports of %d", len(ports), n)
	}
	return ports, nil
}

// Addr returns 127.0.0.1:port.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

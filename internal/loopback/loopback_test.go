package loopback

import (
	"net"
	"testing"
)

func TestFreePortsBelowEphemeral(t *testing.T) {
	ports, err := FreePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	e := ephemeralStart()
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
		if e-1 > lo+100 && (p < lo || p >= e) {
			t.Errorf("port %d outside [%d, %d)", p, lo, e)
		}
		l, err := net.Listen("tcp", Addr(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		l.Close()
	}
}

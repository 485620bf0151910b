package roundrobin_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/internal/roundrobin"
)

type node struct {
	name string
	down bool
}

type conn struct{ driver.Conn }

func (n *node) Connect(context.Context) (driver.Conn, error) {
	if n.down {
		return nil, errors.New(n.name + " down")
	}
	return conn{}, nil
}
func (n *node) Driver() driver.Driver { return nil }

func TestConnector(t *testing.T) {
	a, b, c := &node{name: "a"}, &node{name: "b"}, &node{name: "c"}
	r := roundrobin.New(a, b, c)
	for range 6 {
		if _, err := r.Connect(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Opened(); !slices.Equal(got, []int64{2, 2, 2}) {
		t.Fatalf("opened %v, want 2 on each node", got)
	}
	b.down = true
	for range 3 {
		if _, err := r.Connect(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Opened(); got[1] != 2 || got[0]+got[2] != 7 {
		t.Fatalf("opened %v: the node that is down got a connection, or one was lost", got)
	}
	a.down, c.down = true, true
	_, err := r.Connect(t.Context())
	if err == nil || !errorsContain(err, "a down", "b down", "c down") {
		t.Fatalf("every node down: %v, want each node's error", err)
	}
}

func errorsContain(err error, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			return false
		}
	}
	return true
}

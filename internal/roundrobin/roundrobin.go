// Package roundrobin is a database/sql connector over the nodes of a
// multi-primary cluster (Galera), as a round-robin proxy in front of it
// would be: each new connection goes to the next node in turn, and a node
// that refuses it is skipped for the one after. testkit and bench spread
// their pools with it, so that concurrent clients write on every node.
package roundrobin

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"
)

// Connector opens connections on its nodes in turn. It counts the
// connections opened on each.
type Connector struct {
	nodes []driver.Connector
	next  atomic.Uint64
	conns []atomic.Int64
}

var _ driver.Connector = (*Connector)(nil)

// New returns a Connector over nodes, which must not be empty.
func New(nodes ...driver.Connector) *Connector {
	return &Connector{nodes: nodes, conns: make([]atomic.Int64, len(nodes))}
}

// Connect opens a connection on the next node, or on the first after it
// that accepts one; it returns every node's error when none does, or when
// ctx ends.
func (r *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	n := uint64(len(r.nodes))
	start := r.next.Add(1) - 1
	var errs []error
	for i := range n {
		k := (start + i) % n
		c, err := r.nodes[k].Connect(ctx)
		if err == nil {
			r.conns[k].Add(1)
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Driver returns the first node's driver.
func (r *Connector) Driver() driver.Driver { return r.nodes[0].Driver() }

// Opened returns the connections opened on each node so far.
func (r *Connector) Opened() []int64 {
	out := make([]int64, len(r.conns))
	for i := range r.conns {
		out[i] = r.conns[i].Load()
	}
	return out
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresNode is one server of a PostgreSQL replication group that a
// PostgresFailover fails over.
type PostgresNode struct {
	// URL reaches the server directly (not through the run's proxy) as a
	// superuser: the failover promotes it and reads its WAL receiver.
	URL string
	// Server is its process: the failover kills the primary's.
	Server Server
	// Rejoin makes the node, after it was killed, a standby of primary
	// (host:port) streaming from it, as an operator rebuilds a failed
	// primary (*testkit.PostgresNode's Rejoin: a fresh pg_basebackup -R).
	Rejoin func(ctx context.Context, primary string) error
}

// PostgresFailover is a Failover over a PostgreSQL primary and its
// streaming standbys. Each failover stops the primary's WAL senders for
// the fault's lag (the primary goes on committing: an asynchronous standby
// misses what it acknowledged meanwhile; with a synchronous one, the
// commits wait), kills the primary, promotes the next node (pg_promote),
// moves the clients there and makes every other node, the old primary
// included, its standby again. With a synchronous standby nothing
// acknowledged is lost; with an asynchronous one, the promoted server has
// forgotten acknowledged commits: fence rows, idempotency keys, effects.
type PostgresFailover struct {
	nodes   []PostgresNode
	addrs   []string
	primary int
}

// NewPostgresFailover takes nodes[0] as the primary and the others as its
// standbys, already streaming from it.
func NewPostgresFailover(nodes []PostgresNode) (*PostgresFailover, error) {
	if len(nodes) < 2 {
		return nil, fmt.Errorf("%w: a PostgreSQL failover needs a primary and a standby", ErrInvalidConfig)
	}
	f := &PostgresFailover{nodes: nodes}
	for i, n := range nodes {
		addr, err := urlHost(n.URL)
		if err != nil {
			return nil, fmt.Errorf("%w: node %d: %w", ErrInvalidConfig, i, err)
		}
		if n.Server == nil || n.Rejoin == nil {
			return nil, fmt.Errorf("%w: node %d (%s) needs a Server and a Rejoin", ErrInvalidConfig, i, addr)
		}
		f.addrs = append(f.addrs, addr)
	}
	return f, nil
}

// Primary returns the current primary's host:port.
func (f *PostgresFailover) Primary() string { return f.addrs[f.primary] }

// Failover fails the primary over to the next node (see PostgresFailover).
func (f *PostgresFailover) Failover(ctx context.Context, lag time.Duration, moveClients func(addr string) error) error {
	old := f.primary
	next := (old + 1) % len(f.nodes)
	// Stop the primary's WAL senders, not the standbys' receivers: WAL
	// already sent would wait in the receiver's socket and reach the
	// standby after all.
	senders, err := walSenders(ctx, f.nodes[old].URL)
	if err != nil {
		return fmt.Errorf("chaos: primary %s: %w", f.addrs[old], err)
	}
	for _, pid := range senders {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("chaos: freeze a WAL sender of %s: %w", f.addrs[old], err)
		}
	}
	t := time.NewTimer(lag)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	// The senders run in sessions of their own: the primary's SIGKILL
	// does not reach them, and a thawed one would send the rest.
	for _, pid := range senders {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := f.nodes[old].Server.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	// The rest must finish even when the run ends: a half-done failover
	// leaves no primary to check the history against.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serverDown)
	defer cancel()
	if err := promote(ctx, f.nodes[next].URL); err != nil {
		return fmt.Errorf("chaos: promote %s: %w", f.addrs[next], err)
	}
	f.primary = next
	if err := moveClients(f.addrs[next]); err != nil {
		return err
	}
	for i, n := range f.nodes {
		if i == next {
			continue
		}
		if i != old {
			if err := n.Server.Signal(syscall.SIGKILL); err != nil {
				return err
			}
		}
		if err := n.Rejoin(ctx, f.addrs[next]); err != nil {
			return fmt.Errorf("chaos: %s rejoins %s: %w", f.addrs[i], f.addrs[next], err)
		}
	}
	return nil
}

// walSenders returns the pids of the primary's WAL senders, one per
// standby streaming from it.
func walSenders(ctx context.Context, url string) ([]int, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_replication WHERE state = 'streaming'")
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err == nil && len(pids) == 0 {
		err = errors.New("no standby streaming")
	}
	return pids, err
}

// promote promotes the standby at url and waits until it takes writes.
func promote(ctx context.Context, url string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return errors.New("pg_promote returned false")
	}
	return nil
}

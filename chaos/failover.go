package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	goredis "github.com/redis/go-redis/v9"
)

// Failover is a replicated server the NemesisFailover fault fails over:
// it loses the primary together with its last writes, promotes a replica,
// and says where clients must go now. The run then points the server's
// proxy there (the clients' connections are cut, as a virtual IP or DNS
// switch would). Config.Failovers names each by the server it stands
// for ("redis").
type Failover interface {
	// Failover makes the replicas miss the primary's writes for lag, then
	// kills the primary and promotes a replica; once the new primary takes
	// writes, it calls moveClients with its host:port (before bringing the
	// old primary back, so clients are not kept waiting for that).
	Failover(ctx context.Context, lag time.Duration, moveClients func(addr string) error) error
}

// RedisFailover is a Failover over Redis servers in one replication
// group: the seed's single-Redis failure. Asynchronous replication means
// a lock the primary granted just before it died may be missing on the
// promoted replica, which then grants it again: two holders, which only
// fencing makes safe.
type RedisFailover struct {
	addrs   []string
	servers []Server
	primary int
}

// NewRedisFailover makes addrs[0] the primary and the other servers its
// replicas, and waits until they are in sync. servers[i] is the process
// at addrs[i]; a run kills and restarts them (restarted servers must
// come back empty: no persistence).
func NewRedisFailover(ctx context.Context, addrs []string, servers []Server) (*RedisFailover, error) {
	if len(addrs) < 2 || len(addrs) != len(servers) {
		return nil, fmt.Errorf("%w: a Redis failover needs two or more servers, each with its address", ErrInvalidConfig)
	}
	f := &RedisFailover{addrs: addrs, servers: servers}
	for i := 1; i < len(addrs); i++ {
		if err := f.follow(ctx, i, 0); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Primary returns the current primary's host:port.
func (f *RedisFailover) Primary() string { return f.addrs[f.primary] }

// do runs fn on a client of server i, closing it after.
func (f *RedisFailover) do(ctx context.Context, i int, fn func(c *goredis.Client) error) error {
	c := goredis.NewClient(&goredis.Options{Addr: f.addrs[i], MaxRetries: -1})
	defer c.Close()
	if err := fn(c); err != nil {
		return fmt.Errorf("chaos: redis %s: %w", f.addrs[i], err)
	}
	return nil
}

// follow makes server i a replica of server p and waits until its link
// is up and it has caught up.
func (f *RedisFailover) follow(ctx context.Context, i, p int) error {
	host, port, err := net.SplitHostPort(f.addrs[p])
	if err != nil {
		return fmt.Errorf("chaos: redis address: %w", err)
	}
	// The primary would wait 5 s (repl-diskless-sync-delay) for more
	// replicas before sending its data; a restarted server forgot this.
	if err := f.do(ctx, p, func(c *goredis.Client) error {
		return c.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
	}); err != nil {
		return err
	}
	return f.do(ctx, i, func(c *goredis.Client) error {
		if err := c.SlaveOf(ctx, host, port).Err(); err != nil {
			return err
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			info, err := c.Info(ctx, "replication").Result()
			if err == nil && strings.Contains(info, "master_link_status:up") {
				return nil
			}
			select {
			case <-ctx.Done():
				return errors.Join(fmt.Errorf("replica of %s not in sync", f.addrs[p]), ctx.Err())
			case <-tick.C:
			}
		}
	})
}

// Failover cuts the replicas off the primary for lag (the primary goes on
// granting locks they never receive, as asynchronous replication loses
// what it had not shipped when the primary died), kills the primary,
// promotes the next server, moves the clients there, and brings the old
// primary back as a replica of it.
//
// The replicas are cut with REPLICAOF NO ONE, not frozen: a frozen
// replica still has the primary's last writes in its socket buffer and
// applies them when it resumes, so the locks would survive the failover
// more often than not.
func (f *RedisFailover) Failover(ctx context.Context, lag time.Duration, moveClients func(addr string) error) error {
	old := f.primary
	next := (old + 1) % len(f.addrs)
	for i := range f.addrs {
		if i == old {
			continue
		}
		if err := f.do(ctx, i, func(c *goredis.Client) error { return c.SlaveOf(ctx, "NO", "ONE").Err() }); err != nil {
			return err
		}
	}
	t := time.NewTimer(lag)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	if err := f.servers[old].Signal(syscall.SIGKILL); err != nil {
		return err
	}
	f.primary = next
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serverDown)
	defer cancel()
	if err := moveClients(f.addrs[next]); err != nil {
		return err
	}
	for i := range f.addrs {
		if i == next || i == old {
			continue
		}
		if err := f.follow(ctx, i, next); err != nil {
			return err
		}
	}
	if err := f.servers[old].Restart(ctx); err != nil {
		return err
	}
	return f.follow(ctx, old, next)
}

// injectFailover fails over the Failover f.Pick chooses and points its
// server's proxy at the new primary.
func (n *nemesis) injectFailover(ctx context.Context, f *Fault) error {
	if len(n.failoverNames) == 0 {
		return fmt.Errorf("no failover (Config.Failovers)")
	}
	name := n.failoverNames[int(f.Pick%uint64(len(n.failoverNames)))]
	f.Target = name
	px := n.proxies.by[name]
	if px == nil {
		return fmt.Errorf("no proxied server %q to fail over", name)
	}
	return n.failovers[name].Failover(ctx, f.For, func(addr string) error {
		// Update stops the proxy (closing every connection) and starts it
		// on the same address, forwarding to the new primary. The port is
		// below the ephemeral range, but a port probe elsewhere may hold
		// it for a moment: a proxy left stopped would fail every later
		// fault.
		var err error
		for try := range 5 {
			if err = px.Update(&toxiproxy.Proxy{Listen: px.Listen, Upstream: addr, Enabled: true}); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
				return err
			}
			time.Sleep(time.Duration(try+1) * 20 * time.Millisecond)
		}
		return err
	})
}

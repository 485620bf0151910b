package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/lease"
)

// DefaultPrefix is the key prefix of lock keys when Config.Prefix is empty.
const DefaultPrefix = "/concurkit/locks/"

// cleanupTimeout bounds the lease revocation after an abandoned
// acquisition; it runs with a context detached from the caller's.
const cleanupTimeout = 5 * time.Second

// Config configures a Locker. A nil *Config or a zero field means the
// documented default.
type Config struct {
	// Prefix is prepended to every lock key: the keys of the contenders
	// for key k are <Prefix><url.PathEscape(k)>/<lease id in hex>.
	// Default DefaultPrefix.
	Prefix string
}

// Client is the part of *clientv3.Client the Locker uses.
type Client interface {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
}

var _ Client = (*clientv3.Client)(nil)

// Locker hands out leases backed by etcd leases. It is safe for concurrent
// use and holds no resources of its own: closing the client is the
// caller's business.
type Locker struct {
	c      Client
	prefix string
}

var _ distlock.Locker = (*Locker)(nil)

// New returns a Locker using client (a *clientv3.Client). It returns an
// error matching distlock.ErrInvalidOptions if client is nil.
func New(client Client, cfg *Config) (*Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: etcd: nil client", distlock.ErrInvalidOptions)
	}
	if c, ok := client.(*clientv3.Client); ok && c == nil {
		return nil, fmt.Errorf("%w: etcd: nil client", distlock.ErrInvalidOptions)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	return &Locker{c: client, prefix: c.Prefix}, nil
}

// Acquire blocks until the lock on key is held or ctx ends (then it returns
// errors.Join(distlock.ErrNotAcquired, ctx.Err())). opts.TTL (default
// distlock.DefaultTTL) becomes the etcd lease TTL rounded up to whole
// seconds. It returns distlock.ErrInvalidKey for an empty key,
// distlock.ErrInvalidOptions for a negative TTL, an error matching
// distlock.ErrLeaseLost if the contender's own lease was lost while it
// waited, and etcd errors.
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, false)
}

// TryAcquire is Acquire without waiting: if another holder has the lock it
// revokes its own lease and returns distlock.ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, true)
}

// ttlSeconds rounds a TTL up to whole seconds (at least 1).
func ttlSeconds(ttl time.Duration) int64 {
	return max(1, int64((ttl+time.Second-1)/time.Second))
}

func (l *Locker) acquire(ctx context.Context, key string, opts *distlock.Options, try bool) (_ distlock.Lease, err error) {
	o, err := lease.Resolve(key, opts)
	if err != nil {
		return nil, err
	}
	pfx := l.prefix + url.PathEscape(key) + "/"
	secs := ttlSeconds(o.TTL)

	start := time.Now()
	g, err := l.c.Grant(ctx, secs)
	if err != nil {
		return nil, l.fail(ctx, fmt.Errorf("etcd: grant lease: %w", err))
	}
	id := g.ID
	defer func() {
		if err != nil { // the put may or may not have been applied: revoking covers both
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_, _ = l.c.Revoke(cctx, id)
			cancel()
		}
	}()
	myKey := pfx + strconv.FormatInt(int64(id), 16)
	resp, err := l.c.Txn(ctx).Then(
		clientv3.OpPut(myKey, "", clientv3.WithLease(id)),
		clientv3.OpGet(pfx, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...),
	).Commit()
	if err != nil {
		return nil, l.fail(ctx, fmt.Errorf("etcd: put lock key: %w", err))
	}
	myRev := resp.Header.Revision
	owner := resp.Responses[1].GetResponseRange().Kvs
	if len(owner) == 1 && owner[0].CreateRevision == myRev {
		// No wait: our put is the first key, created at the txn's revision.
		return l.newLease(key, myKey, id, fenced.Token(myRev), o, start)
	}
	if try {
		return nil, distlock.ErrNotAcquired
	}
	// renewed is the local time just before the server last granted or
	// renewed our lease: the validity of the lease counts from there.
	renewed := start
	token, err := l.waitTurn(ctx, pfx, myKey, myRev, id, secs, &renewed)
	if err != nil {
		return nil, l.fail(ctx, err)
	}
	if time.Since(renewed) > o.TTL/2 { // e.g. a stalled process: renew before handing out the lease
		at := time.Now()
		if _, err := l.c.KeepAliveOnce(ctx, id); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return nil, lostWhileWaiting(id, start)
			}
			return nil, l.fail(ctx, fmt.Errorf("etcd: renew lease: %w", err))
		}
		renewed = at
	}
	return l.newLease(key, myKey, id, token, o, renewed)
}

// fail joins a context error with ErrNotAcquired, so cancellation matches
// both; other errors are returned as they are.
func (l *Locker) fail(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return errors.Join(distlock.ErrNotAcquired, cerr)
	}
	return err
}

// waitTurn waits until no key under pfx was created before ours (myRev),
// watching one predecessor at a time and renewing lease id meanwhile. Each
// check also re-reads our own key in the same transaction (etcd#11456: a
// wait can end because our key was deleted when our lease expired; only a
// key that still exists with our lease holds the lock) and returns its
// CreateRevision, the token (the header revision is not, after a wait).
func (l *Locker) waitTurn(ctx context.Context, pfx, myKey string, myRev int64, id clientv3.LeaseID, secs int64, renewed *time.Time) (fenced.Token, error) {
	granted := *renewed
	renew := time.NewTicker(max(time.Duration(secs)*time.Second/3, 300*time.Millisecond))
	defer renew.Stop()
	preds := append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(myRev-1))
	for {
		resp, err := l.c.Txn(ctx).Then(clientv3.OpGet(pfx, preds...), clientv3.OpGet(myKey)).Commit()
		if err != nil {
			return 0, fmt.Errorf("etcd: read predecessors: %w", err)
		}
		mine := resp.Responses[1].GetResponseRange().Kvs
		if len(mine) != 1 || clientv3.LeaseID(mine[0].Lease) != id {
			return 0, fmt.Errorf("%w: etcd: lock key %s deleted while waiting", distlock.ErrLeaseLost, myKey)
		}
		before := resp.Responses[0].GetResponseRange().Kvs
		if len(before) == 0 {
			return fenced.Token(mine[0].CreateRevision), nil
		}
		if err := l.waitDelete(ctx, string(before[0].Key), before[0].CreateRevision, id, renew.C, granted, renewed); err != nil {
			return 0, err
		}
	}
}

func lostWhileWaiting(id clientv3.LeaseID, granted time.Time) error {
	return fmt.Errorf("%w: etcd: lease %x (granted %v ago) expired while waiting", distlock.ErrLeaseLost, int64(id), time.Since(granted).Round(time.Millisecond))
}

// waitDelete waits until key (created at createRev) is deleted. The watch
// starts at the current revision, so that etcd serves it from its synced
// watcher group (a watch from an older revision is caught up by a loop
// that runs every 100 ms); once the watch is live, the key is read again
// to catch a deletion that happened before.
func (l *Locker) waitDelete(ctx context.Context, key string, createRev int64, id clientv3.LeaseID, renew <-chan time.Time, granted time.Time, renewed *time.Time) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := l.c.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-renew:
			at := time.Now()
			if _, err := l.c.KeepAliveOnce(ctx, id); err != nil {
				if errors.Is(err, rpctypes.ErrLeaseNotFound) {
					return lostWhileWaiting(id, granted)
				}
				return fmt.Errorf("etcd: renew lease while waiting: %w", err)
			}
			*renewed = at
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return nil // watch ended (no leader, compaction): re-read and watch again
			}
			if wr.Created {
				g, err := l.c.Get(ctx, key)
				if err != nil {
					return fmt.Errorf("etcd: read predecessor: %w", err)
				}
				if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != createRev {
					return nil
				}
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		}
	}
}

func (l *Locker) newLease(key, myKey string, id clientv3.LeaseID, token fenced.Token, o distlock.Options, start time.Time) (distlock.Lease, error) {
	granted := time.Duration(ttlSeconds(o.TTL)) * time.Second
	ls, err := lease.New(lease.Config{
		Key:        key,
		Token:      token,
		TTL:        o.TTL, // <= granted: the context ends before the server's lease
		Start:      start,
		AutoExtend: o.AutoExtend,
		Backend: lease.Backend{
			Extend: func(ctx context.Context, ttl time.Duration) error {
				if ttl > granted {
					return fmt.Errorf("%w: etcd: Extend ttl %v exceeds the lease's granted TTL %v", distlock.ErrInvalidOptions, ttl, granted)
				}
				if _, err := l.c.KeepAliveOnce(ctx, id); err != nil {
					if errors.Is(err, rpctypes.ErrLeaseNotFound) {
						return fmt.Errorf("%w: etcd: lease %x not found", distlock.ErrLeaseLost, int64(id))
					}
					return fmt.Errorf("etcd: extend: %w", err)
				}
				return nil
			},
			Release: func(ctx context.Context) error {
				// Revoking deletes only keys attached to our lease.
				if _, err := l.c.Revoke(ctx, id); err != nil {
					if errors.Is(err, rpctypes.ErrLeaseNotFound) {
						return fmt.Errorf("%w: etcd: lease %x not found", distlock.ErrLeaseLost, int64(id))
					}
					return fmt.Errorf("etcd: release: %w", err)
				}
				return nil
			},
		},
	})
	if err != nil {
		return nil, err
	}
	go l.watch(ls, myKey, id, int64(token))
	return ls, nil
}

// watch marks ls lost when its key is deleted (lease expired or revoked
// on the server, or the key deleted by someone else). If the watch breaks
// and its revision has been compacted meanwhile, the key is re-read: still
// there on our lease means still held, and watching resumes from there.
func (l *Locker) watch(ls *lease.Lease, myKey string, id clientv3.LeaseID, createRev int64) {
	ctx := ls.Context()
	var clientCtx context.Context
	if c, ok := l.c.(interface{ Ctx() context.Context }); ok {
		clientCtx = c.Ctx()
	}
	from := createRev + 1
	for ctx.Err() == nil {
		wch := l.c.Watch(ctx, myKey, clientv3.WithRev(from), clientv3.WithFilterPut())
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					ls.Lost(fmt.Errorf("%w: etcd: lock key %s deleted", distlock.ErrLeaseLost, myKey))
					return
				}
			}
			from = wr.Header.Revision + 1
		}
		if clientCtx != nil && clientCtx.Err() != nil {
			ls.Lost(fmt.Errorf("%w: etcd: client closed", distlock.ErrLeaseLost))
			return
		}
		if ctx.Err() != nil {
			return
		}
		// The watch ended (compaction, lost leader, stream error): back off
		// briefly, then re-read the key before watching again.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		resp, err := l.c.Get(ctx, myKey)
		switch {
		case err != nil:
			continue // unknown: the validity deadline still bounds the lease
		case len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != id || resp.Kvs[0].CreateRevision != createRev:
			ls.Lost(fmt.Errorf("%w: etcd: lock key %s gone", distlock.ErrLeaseLost, myKey))
			return
		}
		from = resp.Header.Revision + 1
	}
}

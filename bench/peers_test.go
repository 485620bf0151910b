package bench_test

// BenchmarkPeers: concurkit side by side with what people use today, in
// the same run, interleaved (peers_harness_test.go). The peer libraries
// are imported here, in bench's tests, and nowhere else (deps_test.go).
//
//	go test ./bench -run '^$' -bench Peers -benchtime 1x -count 10 > peers.txt
//	benchstat -col /impl peers.txt
//
// scripts/bench-peers.sh does exactly that. Pairs (sub-benchmark name:
// implementations, the first being the baseline):
//
//	redis       bsm/redislock Obtain+Release (impl=peer); concurkit's
//	            redislock with the in-process token counter (impl=concurkit,
//	            the cheapest source) and with a PostgreSQL sequence
//	            (impl=concurkit+pgseq, the default a user deploys)
//	redlock     go-redsync/redsync over the 5 Redlock masters; concurkit's
//	            redlock, same two token sources
//	etcd        etcd client/v3/concurrency Mutex on one Session; etcdlock
//	zookeeper   go-zookeeper Lock; zklock
//	postgres    pg_advisory_lock + nextval + pg_advisory_unlock on a pool
//	            connection, by hand; pglock
//	fenced      a plain UPDATE; fencedpg.Update with increasing tokens
//	optimistic  a hand-written UPDATE … WHERE id = $1 AND version = $2;
//	            optimisticpg.Update
//	forupdate   BEGIN, SELECT … FOR UPDATE, UPDATE, COMMIT by hand;
//	            pessimisticpg.InTx around the same statements
//	            (impl=concurkit) and with LockRows first
//	            (impl=concurkit+lockrows, one statement more)
//	election-etcd       etcd concurrency.Election Campaign+Resign;
//	                    distlock/election on etcdlock
//	election-zookeeper  go-zookeeper's Lock used as an election;
//	                    distlock/election on zklock
//
// Every operation is uncontended (one goroutine): the pairs measure what
// each implementation adds to the same round trips, not lock handover.
// Each lock is acquired with a blocking Acquire/Lock and a 10 s TTL, and
// released at once.

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	bsmlock "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/election"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/distlock/zklock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/testkit"
)

const peerTTL = 10 * time.Second

func BenchmarkPeers(b *testing.B) {
	b.Run("redis", benchPeersRedis)
	b.Run("redlock", benchPeersRedlock)
	b.Run("etcd", benchPeersEtcd)
	b.Run("zookeeper", benchPeersZooKeeper)
	b.Run("postgres", benchPeersPostgres)
	b.Run("fenced", benchPeersFenced)
	b.Run("optimistic", benchPeersOptimistic)
	b.Run("forupdate", benchPeersForUpdate)
	b.Run("election-etcd", benchPeersElectionEtcd)
	b.Run("election-zookeeper", benchPeersElectionZooKeeper)
}

// campaignOp is one uncontended Campaign + Resign of a concurkit
// election (no board: the lock and its term only, as the peers give).
func campaignOp(l distlock.Locker, name string) func(ctx context.Context) error {
	e, err := election.New(l, name, &election.Config{TTL: peerTTL})
	if err != nil {
		return func(context.Context) error { return err }
	}
	return func(ctx context.Context) error {
		term, err := e.Campaign(ctx, "me")
		if err != nil {
			return err
		}
		return term.Resign(ctx)
	}
}

// election-etcd: etcd's concurrency.Election (Campaign + Resign on one
// Session, the leader's revision as its would-be token) beside
// distlock/election on etcdlock.
func benchPeersElectionEtcd(b *testing.B) {
	c, prefix := testkit.Etcd(b)
	s, err := concurrency.NewSession(c, concurrency.WithTTL(int(peerTTL/time.Second)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	l, err := etcdlock.New(c, &etcdlock.Config{Prefix: prefix + "ck/"})
	if err != nil {
		b.Fatal(err)
	}
	peer := concurrency.NewElection(s, prefix+"peer")
	runPeers(b,
		impl{"peer", func(ctx context.Context) error {
			if err := peer.Campaign(ctx, "me"); err != nil {
				return err
			}
			if peer.Rev() <= 0 {
				return fmt.Errorf("etcd election: no revision")
			}
			return peer.Resign(ctx)
		}},
		impl{"concurkit", campaignOp(l, "leader")},
	)
}

// election-zookeeper: the election a go-zookeeper user writes (its Lock
// recipe: the lowest sequential node leads) beside distlock/election on
// zklock.
func benchPeersElectionZooKeeper(b *testing.B) {
	servers, root := testkit.ZooKeeper(b)
	conn := testkit.ZooKeeperConn(b, servers)
	peer := zk.NewLock(conn, root+"/peer-leader", zk.WorldACL(zk.PermAll))
	l, err := zklock.New(servers, &zklock.Config{Root: root + "/ck"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close(context.Background()) })
	runPeers(b,
		impl{"peer", func(context.Context) error {
			if err := peer.Lock(); err != nil {
				return err
			}
			return peer.Unlock()
		}},
		impl{"concurkit", campaignOp(l, "leader")},
	)
}

// lockOp is one Acquire + Release of a concurkit Locker.
func lockOp(l distlock.Locker, key string) func(ctx context.Context) error {
	opts := &distlock.Options{TTL: peerTTL}
	return func(ctx context.Context) error {
		ls, err := l.Acquire(ctx, key, opts)
		if err != nil {
			return err
		}
		return ls.Release(ctx)
	}
}

// pgTokens returns the default token source of the Redis lockers: a
// PostgreSQL sequence (fencedpg.Sequence) on a fresh schema.
func pgTokens(b *testing.B) fenced.Source {
	b.Helper()
	pool := testkit.Postgres(b)
	if err := fencedpg.CreateSequence(b.Context(), pool); err != nil {
		b.Fatal(err)
	}
	src, err := fencedpg.NewSequence(pool)
	if err != nil {
		b.Fatal(err)
	}
	return src
}

// deleteRedisLocks deletes, at cleanup, concurkit's Redis keys of the
// user keys that start with prefix ("ck:{<prefix>…", see
// redislock.LockKey); testkit deletes the keys that start with prefix.
func deleteRedisLocks(b *testing.B, prefix string, cs ...*goredis.Client) {
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, c := range cs {
			iter := c.Scan(ctx, 0, "ck:{"+prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				_ = c.Unlink(ctx, iter.Val()).Err()
			}
		}
	})
}

// fenceTTL keeps the per-key fence records for a minute, not a day: every
// run uses keys of its own.
const fenceTTL = time.Minute

func benchPeersRedis(b *testing.B) {
	c, prefix := testkit.Redis(b)
	deleteRedisLocks(b, prefix, c)
	peer := bsmlock.New(c)
	peerKey := prefix + "peer"
	cheap, err := redislock.New(c, &redislock.Config{Source: &atomicTokens{}, FenceTTL: fenceTTL})
	if err != nil {
		b.Fatal(err)
	}
	def, err := redislock.New(c, &redislock.Config{Source: pgTokens(b), FenceTTL: fenceTTL})
	if err != nil {
		b.Fatal(err)
	}
	runPeers(b,
		impl{"peer", func(ctx context.Context) error {
			lk, err := peer.Obtain(ctx, peerKey, peerTTL, nil)
			if err != nil {
				return err
			}
			return lk.Release(ctx)
		}},
		// One key per token source: a key must only ever see one source.
		impl{"concurkit", lockOp(cheap, prefix+"atomic")},
		impl{"concurkit+pgseq", lockOp(def, prefix+"pgseq")},
		// The same calls under a context that cannot be cancelled: with
		// nothing to stop waiting for, redislock sends each request on the
		// caller's goroutine instead of handing it to another one (which
		// a cancellable context needs, go-redis's default options not
		// stopping a read on cancellation). The difference to "concurkit"
		// is the price of honouring cancellation against a frozen server.
		impl{"concurkit+nocancel", func(ctx context.Context) error {
			return lockOp(cheap, prefix+"atomic")(context.WithoutCancel(ctx))
		}},
	)
}

func benchPeersRedlock(b *testing.B) {
	cs, prefix := testkit.Redlock(b)
	deleteRedisLocks(b, prefix, cs...)
	pools := make([]redsyncredis.Pool, 0, len(cs))
	for _, c := range cs {
		pools = append(pools, redsyncgoredis.NewPool(c))
	}
	rs := redsync.New(pools...)
	peerKey := prefix + "peer"
	cheap, err := redlock.New(cs, &redlock.Config{Source: &atomicTokens{}, FenceTTL: fenceTTL})
	if err != nil {
		b.Fatal(err)
	}
	def, err := redlock.New(cs, &redlock.Config{Source: pgTokens(b), FenceTTL: fenceTTL})
	if err != nil {
		b.Fatal(err)
	}
	runPeers(b,
		impl{"peer", func(ctx context.Context) error {
			m := rs.NewMutex(peerKey, redsync.WithExpiry(peerTTL))
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			ok, err := m.UnlockContext(ctx)
			if err == nil && !ok {
				err = fmt.Errorf("redsync: unlock refused")
			}
			return err
		}},
		impl{"concurkit", lockOp(cheap, prefix+"atomic")},
		impl{"concurkit+pgseq", lockOp(def, prefix+"pgseq")},
	)
}

func benchPeersEtcd(b *testing.B) {
	c, prefix := testkit.Etcd(b)
	s, err := concurrency.NewSession(c, concurrency.WithTTL(int(peerTTL/time.Second)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	l, err := etcdlock.New(c, &etcdlock.Config{Prefix: prefix + "ck/"})
	if err != nil {
		b.Fatal(err)
	}
	runPeers(b,
		impl{"peer", func(ctx context.Context) error {
			m := concurrency.NewMutex(s, prefix+"peer")
			if err := m.Lock(ctx); err != nil {
				return err
			}
			// The fencing token a user of Mutex would take (exact here:
			// nobody waited).
			if m.Header().Revision <= 0 {
				return fmt.Errorf("etcd mutex: no revision")
			}
			return m.Unlock(ctx)
		}},
		impl{"concurkit", lockOp(l, "lock")},
	)
}

func benchPeersZooKeeper(b *testing.B) {
	servers, root := testkit.ZooKeeper(b)
	conn := testkit.ZooKeeperConn(b, servers)
	peer := zk.NewLock(conn, root+"/peer", zk.WorldACL(zk.PermAll))
	l, err := zklock.New(servers, &zklock.Config{Root: root + "/ck"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close(context.Background()) })
	runPeers(b,
		impl{"peer", func(context.Context) error {
			if err := peer.Lock(); err != nil {
				return err
			}
			return peer.Unlock()
		}},
		impl{"concurkit", lockOp(l, "lock")},
	)
}

// The hand-written advisory lock: lock, mint a token on the holder's
// session, unlock.
const (
	peerAdvisoryLock   = `SELECT pg_advisory_lock($1)`
	peerAdvisoryUnlock = `SELECT pg_advisory_unlock($1)`
	peerNextval        = `SELECT nextval('peer_token_seq')`
	peerCreateSeq      = `CREATE SEQUENCE peer_token_seq`
)

func benchPeersPostgres(b *testing.B) {
	pool := testkit.Postgres(b)
	ctx := b.Context()
	if _, err := pool.Exec(ctx, peerCreateSeq); err != nil {
		b.Fatal(err)
	}
	l, err := pglock.New(pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.CreateSequence(ctx); err != nil {
		b.Fatal(err)
	}
	// Advisory locks are server-wide: random keys keep parallel test runs
	// apart.
	peerKey := advisoryKey()
	runPeers(b,
		impl{"peer", func(ctx context.Context) error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, peerAdvisoryLock, peerKey); err != nil {
				return err
			}
			var tok int64
			if err := conn.QueryRow(ctx, peerNextval).Scan(&tok); err != nil {
				return err
			}
			var ok bool
			if err := conn.QueryRow(ctx, peerAdvisoryUnlock, peerKey).Scan(&ok); err != nil || !ok {
				return fmt.Errorf("unlock: %v %v", ok, err)
			}
			return nil
		}},
		impl{"concurkit", lockOp(l, "peers/"+rand.Text())},
	)
}

func advisoryKey() int64 {
	var k int64
	for _, c := range rand.Text()[:12] {
		k = k*32 + int64(strings.IndexRune("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", c))
	}
	return k
}

// createRows creates table (id bigint primary key, v bigint, and the extra
// columns given) with rows 1 and 2.
func createRows(b *testing.B, pool *pgxpool.Pool, table, extra string) {
	b.Helper()
	q := pgx.Identifier{table}.Sanitize()
	if _, err := pool.Exec(b.Context(), "CREATE TABLE "+q+" (id bigint PRIMARY KEY, v bigint NOT NULL DEFAULT 0"+extra+")"); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(b.Context(), "INSERT INTO "+q+" (id) VALUES (1), (2)"); err != nil {
		b.Fatal(err)
	}
}

const peerPlainUpdate = `UPDATE fenced_rows SET v = $2 WHERE id = $1`

func benchPeersFenced(b *testing.B) {
	pool := testkit.Postgres(b)
	createRows(b, pool, "fenced_rows", ", max_seen_token bigint NOT NULL DEFAULT 0")
	tbl := fenced.Table{Name: "fenced_rows"}
	var tok fenced.Token
	var n int64
	runPeers(b,
		impl{"peer", func(ctx context.Context) error {
			n++
			tag, err := pool.Exec(ctx, peerPlainUpdate, int64(2), n)
			if err == nil && tag.RowsAffected() != 1 {
				err = fmt.Errorf("%d rows", tag.RowsAffected())
			}
			return err
		}},
		impl{"concurkit", func(ctx context.Context) error {
			tok++
			return fencedpg.Update(ctx, pool, tbl, int64(1), tok, map[string]any{"v": int64(tok)})
		}},
	)
}

const peerCAS = `UPDATE cas_rows SET v = $3, version = version + 1 WHERE id = $1 AND version = $2`

func benchPeersOptimistic(b *testing.B) {
	pool := testkit.Postgres(b)
	createRows(b, pool, "cas_rows", ", version bigint NOT NULL DEFAULT 1")
	tbl := optimistic.Table{Name: "cas_rows"}
	peerVer, ckVer := int64(1), int64(1)
	runPeers(b,
		impl{"peer", func(ctx context.Context) error {
			tag, err := pool.Exec(ctx, peerCAS, int64(2), peerVer, peerVer)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return optimistic.ErrConflict
			}
			peerVer++
			return nil
		}},
		impl{"concurkit", func(ctx context.Context) error {
			v, err := optimisticpg.Update(ctx, pool, tbl, int64(1), ckVer, map[string]any{"v": ckVer})
			ckVer = v
			return err
		}},
	)
}

const (
	peerSelectForUpdate = `SELECT v FROM fu_rows WHERE id = $1 FOR UPDATE`
	peerSelectValue     = `SELECT v FROM fu_rows WHERE id = $1`
	peerUpdateValue     = `UPDATE fu_rows SET v = $2 WHERE id = $1`
)

func benchPeersForUpdate(b *testing.B) {
	pool := testkit.Postgres(b)
	createRows(b, pool, "fu_rows", "")
	rmw := func(ctx context.Context, tx pgx.Tx, key int64, sel string) error {
		var v int64
		if err := tx.QueryRow(ctx, sel, key).Scan(&v); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, peerUpdateValue, key, v+1)
		return err
	}
	lock := pessimistic.Lock{Strength: pessimistic.ForUpdate}
	runPeers(b,
		impl{"peer", func(ctx context.Context) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := rmw(ctx, tx, 2, peerSelectForUpdate); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}},
		impl{"concurkit", func(ctx context.Context) error {
			return pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
				return rmw(ctx, tx, 1, peerSelectForUpdate)
			})
		}},
		impl{"concurkit+lockrows", func(ctx context.Context) error {
			return pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := pessimisticpg.LockRows(ctx, tx, "fu_rows", "id", []int64{1}, lock); err != nil {
					return err
				}
				return rmw(ctx, tx, 1, peerSelectValue)
			})
		}},
	)
}

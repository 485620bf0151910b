package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitpg"
	"github.com/concurkit/concurkit/ratelimit/ratelimitredis"
)

// ratelimitWorkload: every client asks a fixed-window limiter (Redis or
// PostgreSQL) for one key as fast as it can; the checker counts, per
// window, the requests that were allowed and whose whole call lay inside
// the window, and reports "over-admitted" when more than the limit were.
// A request that straddles a window boundary is left out (the limiter's
// clock read falls somewhere inside the call), so the check never accuses
// a correct limiter; the limit is small (ratelimitRate per 2× the TTL) so
// that windows are full and every fault lands in a contended one.
//
// Unsafe is a check-then-increment limiter: read the count, and if below
// the limit, add one — two clients reading the same count both pass.
type ratelimitWorkload struct{}

// ratelimitRate is the quota per window.
const ratelimitRate = 5

func (ratelimitWorkload) systems(backend string) ([]string, error) {
	switch backend {
	case "redis", "postgres":
		return []string{backend}, nil
	}
	return nil, fmt.Errorf("ratelimit backend %q (want redis or postgres)", backend)
}

// ratelimitLimit is a run's limit: ratelimitRate per two TTLs.
func ratelimitLimit(ttl time.Duration) ratelimit.Limit {
	return ratelimit.Limit{Rate: ratelimitRate, Period: 2 * ttl}
}

// Statements of the PostgreSQL side; %[1]s is the run's schema.
const (
	// rlMigration creates the limiter's tables (toolkit version 5).
	rlMigration = "0005_ratelimit.up.sql"
	// The unsafe limiter's two statements: read, then count.
	rlUnsafeRead = `SELECT coalesce((SELECT used FROM %[1]s.concurkit_ratelimit_windows WHERE key = $1), 0)`
	rlUnsafeAdd  = `INSERT INTO %[1]s.concurkit_ratelimit_windows (key, window_end, used) VALUES ($1, now(), 1)
ON CONFLICT (key) DO UPDATE SET used = %[1]s.concurkit_ratelimit_windows.used + 1`
)

func (ratelimitWorkload) setup(ctx context.Context, e *env) error {
	if e.Backend != "postgres" {
		return nil
	}
	return createScope(ctx, e, "postgres", []string{rlMigration})
}

func (ratelimitWorkload) teardown(ctx context.Context, e *env) error {
	switch e.Backend {
	case "postgres":
		return dropScope(ctx, e, "postgres")
	case "redis":
		c := goredis.NewClient(&goredis.Options{Addr: e.Endpoints.Redis})
		defer c.Close()
		keys, err := c.Keys(ctx, "*"+e.Run+"*").Result()
		if err == nil && len(keys) > 0 {
			err = c.Del(ctx, keys...).Err()
		}
		return err
	}
	return nil
}

// allowFunc is one limiter call: allowed or not, or an error after which
// the request may or may not have been counted.
type allowFunc func(ctx context.Context, key string) (bool, error)

func (ratelimitWorkload) client(ctx context.Context, c *client) error {
	limit := ratelimitLimit(c.TTL)
	var allow allowFunc
	switch c.Backend {
	case "redis":
		rdb := goredis.NewClient(redisOptions(&c.env, c.Endpoints.Redis))
		defer rdb.Close()
		if c.Unsafe {
			allow = unsafeRedisAllow(rdb, limit)
			break
		}
		l, err := ratelimitredis.New(rdb, &ratelimitredis.Config{Algorithm: ratelimit.FixedWindow})
		if err != nil {
			return err
		}
		allow = limiterAllow(l, limit)
	case "postgres":
		pool, err := pgxpool.New(ctx, c.Endpoints.Postgres)
		if err != nil {
			return err
		}
		defer pool.Close()
		if c.Unsafe {
			allow = unsafePostgresAllow(pool, c.Run, limit)
			break
		}
		l, err := ratelimitpg.New(pool, &ratelimitpg.Config{Algorithm: ratelimit.FixedWindow, Schema: c.Run})
		if err != nil {
			return err
		}
		allow = limiterAllow(l, limit)
	}
	key := c.Run + "-key"
	for ctx.Err() == nil {
		op := c.invoke(Op{Kind: "allow", Key: key})
		actx, cancel := context.WithTimeout(ctx, opTimeout(c.TTL))
		ok, err := allow(actx, key)
		cancel()
		switch {
		case err == nil && ok:
			op.Ret = 1
			c.complete(op, OK, nil)
		case err == nil:
			c.complete(op, Fail, nil) // denied: not counted
		default:
			c.complete(op, Unknown, err)
		}
		if t := time.Duration(c.rng.Int64N(int64(5 * time.Millisecond))); t > 0 {
			time.Sleep(t) // clients are not in lockstep
		}
	}
	return nil
}

func limiterAllow(l ratelimit.Limiter, limit ratelimit.Limit) allowFunc {
	return func(ctx context.Context, key string) (bool, error) {
		d, err := l.AllowN(ctx, key, limit, 1)
		return d.Allowed, err
	}
}

// unsafeRedisAllow is the negative control on Redis: GET, compare, INCR,
// per epoch-aligned window.
func unsafeRedisAllow(rdb *goredis.Client, limit ratelimit.Limit) allowFunc {
	return func(ctx context.Context, key string) (bool, error) {
		w := time.Now().UnixNano() / int64(limit.Period)
		k := key + ":" + strconv.FormatInt(w, 10)
		n, err := rdb.Get(ctx, k).Int64()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return false, err
		}
		if n >= limit.Rate {
			return false, nil
		}
		if err := rdb.Incr(ctx, k).Err(); err != nil {
			return false, err
		}
		return true, rdb.Expire(ctx, k, 2*limit.Period).Err()
	}
}

// unsafePostgresAllow is the negative control on PostgreSQL: SELECT the
// window's count, compare, then add one, in separate statements.
func unsafePostgresAllow(pool *pgxpool.Pool, schema string, limit ratelimit.Limit) allowFunc {
	return func(ctx context.Context, key string) (bool, error) {
		k := key + ":" + strconv.FormatInt(time.Now().UnixNano()/int64(limit.Period), 10)
		var n int64
		if err := pool.QueryRow(ctx, fmt.Sprintf(rlUnsafeRead, schema), k).Scan(&n); err != nil {
			return false, err
		}
		if n >= limit.Rate {
			return false, nil
		}
		_, err := pool.Exec(ctx, fmt.Sprintf(rlUnsafeAdd, schema), k)
		return err == nil, err
	}
}

func (ratelimitWorkload) check(_ context.Context, e *env, ops []Op) (*Report, error) {
	return checkRateLimit(ops, ratelimitLimit(e.TTL)), nil
}

// checkRateLimit counts, per epoch-aligned window of limit.Period, the
// allowed requests whose call began and returned inside it.
func checkRateLimit(ops []Op, limit ratelimit.Limit) *Report {
	r := &Report{}
	period := int64(limit.Period)
	admitted := map[int64]int{}
	var allowed, denied, unknown, straddling int
	for _, op := range ops {
		if op.Kind != "allow" {
			continue
		}
		switch {
		case op.Outcome == OK && op.Ret == 1:
			allowed++
			if w := op.Call / period; op.Return/period == w {
				admitted[w]++
			} else {
				straddling++
			}
		case op.Outcome == Fail:
			denied++
		default:
			unknown++
		}
	}
	windows := slices.Sorted(func(yield func(int64) bool) {
		for w := range admitted {
			if !yield(w) {
				return
			}
		}
	})
	full := 0
	for _, w := range windows {
		n := admitted[w]
		if n >= int(limit.Rate) {
			full++
		}
		if n > int(limit.Rate) {
			r.add("over-admitted", "window starting %s: %d requests allowed, limit %d",
				time.Unix(0, w*period).UTC().Format("15:04:05.000"), n, limit.Rate)
		}
	}
	r.note("limit %v: %d allowed (%d across a window boundary, not judged), %d denied, %d unknown; %d windows, %d full",
		limit, allowed, straddling, denied, unknown, len(windows), full)
	return r.finish()
}

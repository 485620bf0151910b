package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock/semaphore"
	"github.com/concurkit/concurkit/fenced"
)

// semaphoreWorkload is a counting semaphore (package distlock/semaphore)
// on the run's lock backend: N permits (Options "keys", default 3), one
// fenced counter per permit (c0 … cN-1). Every client acquires a permit,
// increments that permit's counter one to three times as the counter
// workload does (read, think, write + 1 and a log row, the permit's token
// as the fencing token; unsafe, no token), and releases it. Client pauses
// go to holders three times in four; a paused or killed holder's permit
// passes to another client when its lease runs out.
//
// The counter's checks apply per permit: no lost update and no stale
// write on a permit's counter means that no two holders of one permit had
// their writes accepted at once — so never more than N holders with
// accepted writes. The report notes the handovers of each permit (a change
// of token in its log) and the time from the last acknowledged write of
// one holder to the first of the next (p50, p99, max).
type semaphoreWorkload struct{ counterWorkload }

// semaphoreDefaultPermits is N when Options has no "keys".
const semaphoreDefaultPermits = 3

// withPermits returns e with Options["keys"] defaulted to the permits.
func withPermits(e env) env {
	if _, ok := e.Options["keys"]; !ok {
		e.Options = maps.Clone(e.Options)
		if e.Options == nil {
			e.Options = map[string]string{}
		}
		e.Options["keys"] = strconv.Itoa(semaphoreDefaultPermits)
	}
	return e
}

func (w semaphoreWorkload) setup(ctx context.Context, e *env) error {
	pe := withPermits(*e)
	return w.counterWorkload.setup(ctx, &pe)
}

func (semaphoreWorkload) client(ctx context.Context, c *client) error {
	c.env = withPermits(c.env)
	pool, err := pgxpool.New(ctx, c.Endpoints.Postgres)
	if err != nil {
		return err
	}
	defer pool.Close()
	l, closeLocker, err := locker(ctx, &c.env, pool)
	if err != nil {
		return err
	}
	defer closeLocker()
	o, err := parseCounterOptions(c.Options)
	if err != nil {
		return err
	}
	sem, err := semaphore.New(l, c.Run+"-sem", o.keys, &semaphore.Config{TTL: c.TTL})
	if err != nil {
		return err
	}
	table := fenced.Table{Name: c.Run, KeyColumn: "id"}
	for ctx.Err() == nil {
		acq := c.invoke(Op{Kind: "acquire"})
		actx, cancel := c.opContext(ctx, 5*c.TTL)
		lease, err := sem.Acquire(actx)
		cancel()
		if err != nil {
			c.complete(acq, Fail, err)
			continue
		}
		i, err := strconv.Atoi(lease.Key()[strings.LastIndexByte(lease.Key(), '/')+1:])
		if err != nil || i < 0 || i >= o.keys {
			_ = lease.Release(context.WithoutCancel(ctx))
			return fmt.Errorf("chaos: semaphore permit key %q", lease.Key())
		}
		key := counterKey(i)
		acq.Key, acq.Token = key, int64(lease.Token())
		c.complete(acq, OK, nil)
		for n := 1 + c.rng.IntN(3); n > 0 && ctx.Err() == nil; n-- {
			c.holdAndIncrement(ctx, pool, table, key, lease.Token(), o.think)
		}
		c.release(ctx, key, acq.Token, lease.Release)
	}
	return nil
}

func (w semaphoreWorkload) check(ctx context.Context, e *env, ops []Op) (*Report, error) {
	r, err := w.counterWorkload.check(ctx, e, ops)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, e.Endpoints.Postgres)
	if err != nil {
		return nil, fmt.Errorf("chaos: postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, fmt.Sprintf(counterLogAll, e.Run))
	if err != nil {
		return nil, fmt.Errorf("chaos: read log: %w", err)
	}
	log, err := pgx.CollectRows(rows, pgx.RowToStructByPos[logRow])
	if err != nil {
		return nil, fmt.Errorf("chaos: read log: %w", err)
	}
	byKey := map[string][]logRow{}
	for _, row := range log {
		byKey[row.Key] = append(byKey[row.Key], row)
	}
	var gaps []int64
	changes := 0
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		g, n := handovers(ops, byKey[k])
		gaps, changes = append(gaps, g...), changes+n
	}
	r.note("permits: %d handovers; last write of a holder to the next holder's first: %s", changes, quantiles(gaps))
	return r, nil
}

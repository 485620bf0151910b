package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock/election"
	"github.com/concurkit/concurkit/fenced"
)

// electionWorkload is leader election (package distlock/election) on the
// run's lock backend: every client campaigns in one election; the leader
// increments counter c0 as the counter workload does (read, think, write
// + 1 with a log row, the term as the fencing token; unsafe, no token)
// again and again, for as long as its term holds, then resigns (or finds
// its term lost) and campaigns again. A paused or killed leader is
// deposed, and another client is elected. Client pauses go to the leader
// three times in four (it is the holder).
//
// The checks are the counter's (lost-update, stale-write, lost-ack,
// phantom, final): at most one leader's writes accepted at a time, terms
// accepted in increasing order. The report also notes the failovers seen
// in the log — each change of term — with the time from the deposed
// leader's last acknowledged write to its successor's first (p50, p99,
// max): how long the job stood still.
type electionWorkload struct{ counterWorkload }

func (electionWorkload) client(ctx context.Context, c *client) error {
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
	e, err := election.New(l, c.Run+"-leader", &election.Config{TTL: c.TTL})
	if err != nil {
		return err
	}
	table := fenced.Table{Name: c.Run, KeyColumn: "id"}
	key := counterKey(0)
	for ctx.Err() == nil {
		acq := c.invoke(Op{Kind: "acquire", Key: key})
		term, err := e.Campaign(ctx, strconv.Itoa(c.process))
		if err != nil {
			c.complete(acq, Fail, err)
			continue
		}
		acq.Token = int64(term.Number())
		c.complete(acq, OK, nil)
		// A leader checks its term between increments, not inside one
		// (as the counter's holders ignore their lease): a pause between
		// the read and the write is what the fence must catch.
		for term.Valid() && ctx.Err() == nil {
			c.holdAndIncrement(ctx, pool, table, key, term.Number(), o.think)
		}
		c.release(ctx, key, acq.Token, term.Resign)
	}
	return nil
}

func (w electionWorkload) check(ctx context.Context, e *env, ops []Op) (*Report, error) {
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
	r.note("%s", failovers(ops, log))
	return r, nil
}

// failovers describes the changes of term in log (accepted increments
// in commit order): how many, and the time from the last acknowledged
// write of one term to the first of the next (p50, p99, max).
func failovers(ops []Op, log []logRow) string {
	gaps, changes := handovers(ops, log)
	return fmt.Sprintf("failovers: %d changes of term; last write of a term to the next term's first: %s", changes, quantiles(gaps))
}

// handovers returns, for log (one key's accepted increments in commit
// order), the number of changes of token and the nanoseconds from the
// last acknowledged write of one token to the first of the next. Writes
// whose answer the client never got have no time and are left out.
func handovers(ops []Op, log []logRow) (gaps []int64, changes int) {
	at := map[[2]int64]int64{}
	for _, op := range ops {
		if op.Kind == "incr" && op.Outcome == OK {
			at[[2]int64{int64(op.Process), op.Seq}] = op.Return
		}
	}
	var lastTok, lastAt, since int64
	for _, row := range log {
		if row.Token != lastTok {
			if lastTok != 0 {
				changes++
				since = lastAt
			}
			lastTok = row.Token
		}
		if t, timed := at[[2]int64{int64(row.Process), row.Seq}]; timed {
			if since != 0 && t > since {
				gaps = append(gaps, t-since)
			}
			since, lastAt = 0, t
		}
	}
	return gaps, changes
}

// quantiles formats p50, p99 and max of gaps (nanoseconds).
func quantiles(gaps []int64) string {
	if len(gaps) == 0 {
		return "none timed"
	}
	slices.Sort(gaps)
	q := func(p float64) time.Duration {
		return time.Duration(gaps[min(len(gaps)-1, int(p*float64(len(gaps))))]).Round(time.Millisecond)
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d timed)", q(0.50), q(0.99), time.Duration(gaps[len(gaps)-1]).Round(time.Millisecond), len(gaps))
}

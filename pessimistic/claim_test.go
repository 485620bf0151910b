package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
)

const (
	totalJobs   = 200
	claimers    = 8
	claimBatch  = 5
	jobsPayload = "job-%03d"
)

// checkClaims asserts that every job id 1..totalJobs was claimed exactly
// once, by the worker that got it, with its payload.
func checkClaims(t *testing.T, claimed [][]pessimistic.Job) {
	t.Helper()
	seen := make(map[int64]int)
	for w, jobs := range claimed {
		for _, j := range jobs {
			if prev, dup := seen[j.ID]; dup {
				t.Errorf("job %d claimed by worker %d and %d", j.ID, prev, w)
			}
			seen[j.ID] = w
			if want := fmt.Sprintf(jobsPayload, j.ID); string(j.Payload) != want {
				t.Errorf("job %d payload %q, want %q", j.ID, j.Payload, want)
			}
		}
	}
	for id := int64(1); id <= totalJobs; id++ {
		if _, ok := seen[id]; !ok {
			t.Errorf("job %d never claimed", id)
		}
	}
	if len(seen) != totalJobs {
		t.Errorf("%d distinct jobs claimed, want %d", len(seen), totalJobs)
	}
	per := make([]int, len(claimed))
	for w := range claimed {
		per[w] = len(claimed[w])
	}
	t.Logf("jobs per worker: %v", per)
}

// hold makes the first claim of every worker wait until all workers hold a
// claim, so that SKIP LOCKED really has locked rows to skip.
type hold struct {
	g    *gate
	once []sync.Once
}

func newHold(n int) *hold { return &hold{g: newGate(n), once: make([]sync.Once, n)} }
func (h *hold) at(w int)  { h.once[w].Do(h.g.wait) }

func TestClaimJobsPostgres(t *testing.T) {
	pool := pgPool(t, claimers+2)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "INSERT INTO jobs (payload) SELECT format('job-%s', lpad(g::text, 3, '0')) FROM generate_series(1, $1) g", totalJobs); err != nil {
		t.Fatal(err)
	}
	claimed := make([][]pessimistic.Job, claimers)
	h := newHold(claimers)
	go h.g.start()
	var wg sync.WaitGroup
	for w := range claimers {
		wg.Go(func() {
			for {
				var jobs []pessimistic.Job
				err := pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
					var err error
					jobs, err = pessimisticpg.ClaimJobs(ctx, tx, "jobs", claimBatch, &pessimistic.ClaimOptions{Worker: fmt.Sprint("w", w)})
					if err == nil {
						h.at(w) // first claim: hold the locks until every worker has its batch
					}
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				claimed[w] = append(claimed[w], jobs...)
			}
		})
	}
	wg.Wait()
	checkClaims(t, claimed)
	var pending, badOwner int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state <> 'claimed'), count(*) FILTER (WHERE claimed_by IS NULL OR claimed_at IS NULL) FROM jobs`).Scan(&pending, &badOwner); err != nil {
		t.Fatal(err)
	}
	if pending != 0 || badOwner != 0 {
		t.Errorf("%d jobs not claimed, %d without owner/time", pending, badOwner)
	}
	for w, jobs := range claimed {
		ids := make([]int64, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE id = ANY($1) AND claimed_by = $2", ids, fmt.Sprint("w", w)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != len(ids) {
			t.Errorf("worker %d: %d of its %d jobs carry its name", w, n, len(ids))
		}
	}
}

func TestClaimJobsMariaDB(t *testing.T) {
	t.Parallel() // MariaDB only: runs alongside the other MariaDB tests, after the PostgreSQL ones
	db := myDB(t, claimers+2)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO jobs (payload) SELECT CONCAT('job-', LPAD(seq, 3, '0')) FROM seq_1_to_200"); err != nil {
		t.Fatal(err)
	}
	claimed := make([][]pessimistic.Job, claimers)
	h := newHold(claimers)
	go h.g.start()
	var wg sync.WaitGroup
	for w := range claimers {
		wg.Go(func() {
			for {
				var jobs []pessimistic.Job
				err := pessimisticmysql.InTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
					var err error
					jobs, err = pessimisticmysql.ClaimJobs(ctx, tx, "jobs", claimBatch, &pessimistic.ClaimOptions{Worker: fmt.Sprint("w", w)})
					if err == nil {
						h.at(w)
					}
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				claimed[w] = append(claimed[w], jobs...)
			}
		})
	}
	wg.Wait()
	checkClaims(t, claimed)
	var pending, badOwner int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(state <> 'claimed'), 0), COALESCE(SUM(claimed_by IS NULL OR claimed_at IS NULL), 0) FROM jobs`).Scan(&pending, &badOwner); err != nil {
		t.Fatal(err)
	}
	if pending != 0 || badOwner != 0 {
		t.Errorf("%d jobs not claimed, %d without owner/time", pending, badOwner)
	}
}

// TestClaimJobsDisjoint: while one transaction holds its claim, a second
// gets the next jobs; after a rollback the jobs are pending again.
func TestClaimJobsDisjoint(t *testing.T) {
	ids := func(jobs []pessimistic.Job) []int64 {
		out := make([]int64, len(jobs))
		for i, j := range jobs {
			out[i] = j.ID
		}
		return out
	}
	t.Run("Postgres", func(t *testing.T) {
		pool := pgPool(t, 4)
		ctx := t.Context()
		if _, err := pool.Exec(ctx, "INSERT INTO jobs (payload) SELECT 'p' FROM generate_series(1, 5)"); err != nil {
			t.Fatal(err)
		}
		tx1, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		a, err := pessimisticpg.ClaimJobs(ctx, tx1, "jobs", 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		tx2, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pessimisticpg.ClaimJobs(ctx, tx2, "jobs", 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(a), []int64{1, 2, 3}) || !slices.Equal(ids(b), []int64{4, 5}) {
			t.Errorf("claims %v and %v, want [1 2 3] and [4 5]", ids(a), ids(b))
		}
		if err := tx1.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		c, err := pessimisticpg.ClaimJobs(ctx, tx2, "jobs", 10, nil)
		if err != nil || !slices.Equal(ids(c), []int64{1, 2, 3}) {
			t.Errorf("after rollback: %v, %v; want [1 2 3]", ids(c), err)
		}
		if err := tx2.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("MariaDB", func(t *testing.T) {
		db := myDB(t, 4)
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, "INSERT INTO jobs (payload) VALUES ('p'), ('p'), ('p'), ('p'), ('p')"); err != nil {
			t.Fatal(err)
		}
		tx1, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := pessimisticmysql.ClaimJobs(ctx, tx1, "jobs", 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		tx2, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pessimisticmysql.ClaimJobs(ctx, tx2, "jobs", 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(a), []int64{1, 2, 3}) || !slices.Equal(ids(b), []int64{4, 5}) {
			t.Errorf("claims %v and %v, want [1 2 3] and [4 5]", ids(a), ids(b))
		}
		if err := tx1.Rollback(); err != nil {
			t.Fatal(err)
		}
		c, err := pessimisticmysql.ClaimJobs(ctx, tx2, "jobs", 10, nil)
		if err != nil || !slices.Equal(ids(c), []int64{1, 2, 3}) {
			t.Errorf("after rollback: %v, %v; want [1 2 3]", ids(c), err)
		}
		if err := tx2.Commit(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestClaimJobsRepeatableRead: a worker whose REPEATABLE READ snapshot
// predates another worker's committed claim never claims those jobs again:
// PostgreSQL fails with ErrSerialization (InTx retries it), MariaDB's
// locking read sees the current state and takes the remaining jobs.
func TestClaimJobsRepeatableRead(t *testing.T) {
	rr := &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
	t.Run("Postgres", func(t *testing.T) {
		pool := pgPool(t, 4)
		ctx := t.Context()
		if _, err := pool.Exec(ctx, "INSERT INTO jobs (payload) SELECT 'p' FROM generate_series(1, 5)"); err != nil {
			t.Fatal(err)
		}
		a, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Rollback(context.WithoutCancel(ctx))
		if _, err := a.Exec(ctx, "SELECT count(*) FROM jobs"); err != nil { // a's snapshot
			t.Fatal(err)
		}
		err = pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
			_, err := pessimisticpg.ClaimJobs(ctx, tx, "jobs", 3, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := pessimisticpg.ClaimJobs(ctx, a, "jobs", 3, nil)
		if !errors.Is(err, pessimistic.ErrSerialization) {
			t.Fatalf("claim on a stale snapshot = %v, %v; want ErrSerialization", got, err)
		}
	})
	t.Run("MariaDB", func(t *testing.T) {
		db := myDB(t, 4)
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, "INSERT INTO jobs (payload) VALUES ('p'), ('p'), ('p'), ('p'), ('p')"); err != nil {
			t.Fatal(err)
		}
		a, err := db.BeginTx(ctx, rr)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Rollback()
		if _, err := a.ExecContext(ctx, "SELECT COUNT(*) FROM jobs"); err != nil { // a's snapshot
			t.Fatal(err)
		}
		err = pessimisticmysql.InTx(ctx, db, &pessimistic.Options{Isolation: sql.LevelRepeatableRead}, func(ctx context.Context, tx *sql.Tx) error {
			_, err := pessimisticmysql.ClaimJobs(ctx, tx, "jobs", 3, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := pessimisticmysql.ClaimJobs(ctx, a, "jobs", 3, nil)
		if err != nil && !errors.Is(err, pessimistic.ErrSerialization) { // 1020 on MariaDB >= 11.6
			t.Fatal(err)
		}
		if err == nil && (len(got) != 2 || got[0].ID != 4 || got[1].ID != 5) {
			t.Fatalf("claim on a stale snapshot = %v, want jobs 4 and 5", got)
		}
	})
}

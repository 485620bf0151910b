package distlocktest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/election"
	"github.com/concurkit/concurkit/distlock/election/electionpg"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/migrations"
)

// Election runs the suite of package election on newLocker's backend, as
// subtests: bad input, one leader at a time with strictly increasing
// terms, a cancelled campaign, resignation, a deposed leader fenced out of
// storage and off the board, Lead's re-campaign after a lost term, and
// Observe. A candidate is deposed by Options.Expire on its term's lease,
// after its renewals were stopped (the candidate's Locker drops
// AutoExtend, as a process paused by its garbage collector renews
// nothing); its election TTL is ShortTTL. With Options.NoExpiry the two
// subtests that depose a leader (Deposed, Lead) are left out.
func Election(t *testing.T, newLocker NewLocker, opts Options) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, NewLocker, Options)
	}{
		{"BadInput", electionBadInput},
		{"OneLeader", electionOneLeader},
		{"CampaignCancelled", electionCampaignCancelled},
		{"Resign", electionResign},
		{"Deposed", electionDeposed},
		{"Lead", electionLead},
		{"Observe", electionObserve},
	} {
		if opts.NoExpiry && (tc.name == "Deposed" || tc.name == "Lead") {
			continue // they need a leader whose lease expires
		}
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLocker, opts) })
	}
}

// PostgresBoard returns an electionpg.Board on the toolkit's
// concurkit_elections table, created in a fresh schema of the test
// PostgreSQL (testkit.Postgres).
func PostgresBoard(t *testing.T) election.Board {
	t.Helper()
	fsys, err := migrations.FS(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := fs.ReadFile(fsys, "0006_election.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	db := postgres(t)
	if _, err := db.Exec(t.Context(), string(ddl)); err != nil {
		t.Fatalf("electiontest: create board: %v", err)
	}
	b, err := electionpg.NewBoard(db, "")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// paused wraps a Locker so that its leases are never renewed: the
// candidate holding one is deposed when it expires.
type paused struct{ distlock.Locker }

func (p paused) Acquire(ctx context.Context, key string, o *distlock.Options) (distlock.Lease, error) {
	c := *o
	c.AutoExtend = false
	return p.Locker.Acquire(ctx, key, &c)
}

func newElection(t *testing.T, l distlock.Locker, name string, cfg election.Config) *election.Election {
	t.Helper()
	e, err := election.New(l, name, &cfg)
	if err != nil {
		t.Fatalf("election.New: %v", err)
	}
	return e
}

func campaign(t *testing.T, o Options, e *election.Election, value string) *election.Term {
	t.Helper()
	term, err := e.Campaign(o.waitCtx(t), value)
	if err != nil {
		t.Fatalf("Campaign(%q): %v", value, err)
	}
	if !term.Number().Valid() || !term.Valid() {
		t.Fatalf("elected with term %d, valid %v", term.Number(), term.Valid())
	}
	return term
}

func resign(t *testing.T, term *election.Term) {
	t.Helper()
	if err := term.Resign(context.Background()); err != nil {
		t.Errorf("Resign of term %d: %v", term.Number(), err)
	}
}

func electionBadInput(t *testing.T, newLocker NewLocker, opts Options) {
	setup(t, opts)
	l := closing(newLocker)(t)
	for name, cfg := range map[string]*election.Config{
		"negative TTL":         {TTL: -time.Second},
		"negative poll":        {PollInterval: -1},
		"RetryMin > RetryMax":  {RetryMin: time.Second, RetryMax: time.Millisecond},
		"negative retry bound": {RetryMin: -1},
	} {
		if _, err := election.New(l, "x", cfg); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: New = %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := election.New(l, "", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("empty name: New = %v, want ErrInvalidArgument", err)
	}
	if _, err := election.New(nil, "x", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("nil locker: New = %v, want ErrInvalidArgument", err)
	}
	e := newElection(t, l, Key(t), election.Config{})
	if err := e.Lead(t.Context(), "", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Lead(nil fn) = %v, want ErrInvalidArgument", err)
	}
	if _, err := e.Observe(t.Context()); !errors.Is(err, election.ErrNoBoard) {
		t.Errorf("Observe without a board = %v, want ErrNoBoard", err)
	}
}

// electionOneLeader: 8 candidates, each with its own Locker, campaign in
// rounds; inside a term each checks that it is the only leader and writes
// to the store with its term (which must be accepted). The terms, in the
// order candidates were elected, strictly increase.
func electionOneLeader(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	store := o.Store(t)
	name := Key(t)
	const candidates, rounds = 8, 5
	var (
		leaders atomic.Int32
		mu      sync.Mutex
		terms   []fenced.Token
		wg      sync.WaitGroup
	)
	ctx := o.waitCtx(t)
	for c := range candidates {
		e := newElection(t, newLocker(t), name, election.Config{TTL: o.TTL})
		wg.Go(func() {
			for r := range rounds {
				term, err := e.Campaign(ctx, fmt.Sprint(c))
				if err != nil {
					t.Errorf("candidate %d round %d: Campaign: %v", c, r, err)
					return
				}
				if n := leaders.Add(1); n != 1 {
					t.Errorf("candidate %d elected while %d others lead", c, n-1)
				}
				mu.Lock()
				terms = append(terms, term.Number())
				mu.Unlock()
				if err := store.Write(ctx, term.Number(), fmt.Sprintf("%d %d", term.Number(), c)); err != nil {
					t.Errorf("candidate %d: fenced write with term %d while leader: %v", c, term.Number(), err)
				}
				leaders.Add(-1)
				if err := term.Resign(ctx); err != nil {
					t.Errorf("candidate %d: Resign: %v", c, err)
				}
				if !errors.Is(context.Cause(term.Context()), election.ErrResigned) {
					t.Errorf("term context cause after Resign = %v, want ErrResigned", context.Cause(term.Context()))
				}
			}
		})
	}
	wg.Wait()
	if len(terms) != candidates*rounds {
		t.Fatalf("%d terms, want %d", len(terms), candidates*rounds)
	}
	for i := 1; i < len(terms); i++ {
		if terms[i] <= terms[i-1] {
			t.Fatalf("term %d elected after term %d: terms must strictly increase (%v)", terms[i], terms[i-1], terms)
		}
	}
}

// electionCampaignCancelled: a campaign that waits behind a leader ends
// with its ctx and leaves nothing held: when the leader resigns, a third
// candidate is elected.
func electionCampaignCancelled(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	name := Key(t)
	a := campaign(t, o, newElection(t, newLocker(t), name, election.Config{TTL: o.TTL}), "a")
	b := newElection(t, newLocker(t), name, election.Config{TTL: o.TTL})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if term, err := b.Campaign(ctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign behind a leader, ctx ended = %v (term %v), want context.DeadlineExceeded", err, term)
	}
	resign(t, a)
	c := campaign(t, o, newElection(t, newLocker(t), name, election.Config{TTL: o.TTL}), "c")
	if c.Number() <= a.Number() {
		t.Errorf("term %d after term %d", c.Number(), a.Number())
	}
	resign(t, c)
}

// electionResign: Resign ends the term's context with ErrResigned, marks
// the board vacated, and the next candidate is elected with a higher term.
func electionResign(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	board, name := o.Board(t), Key(t)
	cfg := election.Config{TTL: o.TTL, Board: board}
	ea := newElection(t, newLocker(t), name, cfg)
	a := campaign(t, o, ea, "a")
	if l, err := ea.Leader(t.Context()); err != nil || l != (election.Leader{Term: a.Number(), Value: "a"}) {
		t.Fatalf("board after a's election: %+v, %v", l, err)
	}
	resign(t, a)
	if !errors.Is(context.Cause(a.Context()), election.ErrResigned) || a.Valid() {
		t.Errorf("after Resign: cause %v, valid %v", context.Cause(a.Context()), a.Valid())
	}
	if err := a.Resign(t.Context()); err != nil {
		t.Errorf("second Resign = %v, want the first's result (nil)", err)
	}
	if l, err := ea.Leader(t.Context()); err != nil || !l.Vacated || l.Term != a.Number() {
		t.Errorf("board after Resign: %+v, %v; want term %d vacated", l, err, a.Number())
	}
	b := campaign(t, o, newElection(t, newLocker(t), name, cfg), "b")
	if b.Number() <= a.Number() {
		t.Errorf("term %d after term %d", b.Number(), a.Number())
	}
	if l, err := ea.Leader(t.Context()); err != nil || l != (election.Leader{Term: b.Number(), Value: "b"}) {
		t.Errorf("board after b's election: %+v, %v", l, err)
	}
	resign(t, b)
}

// electionDeposed: a leader whose lease expires (paused, renewing
// nothing) learns it from its term's context before its successor is
// elected; the successor's term is higher; the deposed leader's late
// write and proclamation are refused, the successor's accepted.
func electionDeposed(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	board, store, name := o.Board(t), o.Store(t), Key(t)
	a := campaign(t, o, newElection(t, paused{newLocker(t)}, name, election.Config{TTL: o.ShortTTL, Board: board}), "a")
	if err := store.Write(t.Context(), a.Number(), "a"); err != nil {
		t.Fatalf("leader's write: %v", err)
	}
	elected := make(chan *election.Term, 1)
	eb := newElection(t, newLocker(t), name, election.Config{TTL: o.TTL, Board: board})
	go func() {
		b, err := eb.Campaign(o.waitCtx(t), "b")
		if err != nil {
			t.Errorf("successor's Campaign: %v", err)
		} else {
			checkEnded(t, o, a.Lease(), "when the successor was elected")
		}
		elected <- b
	}()
	o.Expire(t, a.Lease())
	b := <-elected
	if b == nil {
		t.FailNow()
	}
	defer resign(t, b)
	select {
	case <-a.Context().Done():
	case <-time.After(o.LossBound + time.Second):
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, election.ErrLeadershipLost) {
		t.Errorf("deposed leader's term context: cause %v, want ErrLeadershipLost", cause)
	}
	if b.Number() <= a.Number() {
		t.Fatalf("successor's term %d not above the deposed leader's %d", b.Number(), a.Number())
	}
	if err := store.Write(t.Context(), b.Number(), "b"); err != nil {
		t.Fatalf("successor's write: %v", err)
	}
	if err := store.Write(t.Context(), a.Number(), "a late"); !errors.Is(err, fenced.ErrStaleToken) {
		t.Errorf("deposed leader's late write = %v, want fenced.ErrStaleToken", err)
	}
	if err := a.Proclaim(t.Context(), "a late"); !errors.Is(err, fenced.ErrStaleToken) {
		t.Errorf("deposed leader's Proclaim = %v, want fenced.ErrStaleToken", err)
	}
	if v, err := store.Read(t.Context()); err != nil || v != "b" {
		t.Errorf("store holds %q (%v), want the successor's write", v, err)
	}
	if l, err := eb.Leader(t.Context()); err != nil || l != (election.Leader{Term: b.Number(), Value: "b"}) {
		t.Errorf("board: %+v, %v; want the successor", l, err)
	}
	if err := a.Resign(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Errorf("Resign of a deposed leader = %v, want ErrLeaseLost", err)
	}
}

// electionLead: two candidates run Lead. Only one job runs at a time; when
// the running one's term is lost (its candidate paused: the lease
// expires), a job runs again under a higher term; when their ctx ends,
// both Lead calls return it.
func electionLead(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	name := Key(t)
	ctx, cancel := context.WithCancel(o.waitCtx(t))
	defer cancel()
	type started struct {
		term *election.Term
		ctx  context.Context
	}
	jobs := make(chan started, 16)
	var running atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		// Both candidates renew nothing, so whichever leads is deposed at
		// its TTL; the first term is ended by Expire, the rest by Resign.
		e := newElection(t, paused{newLocker(t)}, name, election.Config{TTL: o.ShortTTL, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
		wg.Go(func() {
			errs[i] = e.Lead(ctx, fmt.Sprint(i), func(jctx context.Context, term *election.Term) error {
				if n := running.Add(1); n != 1 {
					t.Errorf("two jobs run at once (term %d)", term.Number())
				}
				defer running.Add(-1)
				jobs <- started{term, jctx}
				<-jctx.Done()
				return context.Cause(jctx)
			})
		})
	}
	first := <-jobs
	o.Expire(t, first.term.Lease())
	<-first.ctx.Done()
	if cause := context.Cause(first.ctx); !errors.Is(cause, election.ErrLeadershipLost) {
		t.Errorf("job context after the lease expired: cause %v, want ErrLeadershipLost", cause)
	}
	var second started
	select {
	case second = <-jobs:
	case <-ctx.Done():
		t.Fatal("no job ran again after the first term was lost")
	}
	if second.term.Number() <= first.term.Number() {
		t.Errorf("job re-ran under term %d after term %d", second.term.Number(), first.term.Number())
	}
	cancel()
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("candidate %d: Lead after ctx ended = %v, want context.Canceled", i, err)
		}
	}
}

// electionObserve: an observer (no candidate) sees each leader, its new
// value, its resignation and its successor, in order.
func electionObserve(t *testing.T, newLocker NewLocker, opts Options) {
	o := setup(t, opts)
	newLocker = closing(newLocker)
	board, name := o.Board(t), Key(t)
	cfg := election.Config{TTL: o.TTL, Board: board, PollInterval: 20 * time.Millisecond}
	watcher := newElection(t, newLocker(t), name, cfg)
	if _, err := watcher.Leader(t.Context()); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader before any election = %v, want ErrNoLeader", err)
	}
	ctx, cancel := context.WithCancel(o.waitCtx(t))
	ch, err := watcher.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func(want election.Leader) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Fatalf("Observe sent %+v, want %+v", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("Observe sent nothing; want %+v", want)
		}
	}
	a := campaign(t, o, newElection(t, newLocker(t), name, cfg), "a:1")
	next(election.Leader{Term: a.Number(), Value: "a:1"})
	if err := a.Proclaim(ctx, "a:2"); err != nil {
		t.Fatal(err)
	}
	next(election.Leader{Term: a.Number(), Value: "a:2"})
	resign(t, a)
	next(election.Leader{Term: a.Number(), Value: "a:2", Vacated: true})
	b := campaign(t, o, newElection(t, newLocker(t), name, cfg), "b")
	next(election.Leader{Term: b.Number(), Value: "b"})
	resign(t, b)
	cancel()
	for range ch { // drains until Observe closes it
	}
}

// Package fencedtest is the behaviour suite every fenced SQL adapter runs
// against its real server (fencedpg on PostgreSQL, fencedmysql on
// MariaDB), so both are held to the same assertions, written once.
package fencedtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/observe"
)

// Dialect is one adapter on one database (the accounts table of the
// dialect's AccountsDDL already created).
type Dialect struct {
	Name   string
	Write  func(ctx context.Context, t fenced.Table, key int64, tok fenced.Token, set map[string]any) error
	Update func(ctx context.Context, t fenced.Table, key int64, tok fenced.Token, set map[string]any) error
	Exec   func(ctx context.Context, sql string) error
	// Read returns the owner, amount, token and version of an account.
	Read func(ctx context.Context, key int64) (owner string, amount, tok, version int64, err error)
	// CAS is the optimistic writer: a plain UPDATE accounts SET amount =
	// amount + delta, version = version + 1 WHERE id = key AND version =
	// version, returning the rows it changed.
	CAS func(ctx context.Context, key, version, delta int64) (int64, error)
}

// Accounts is the table the suite writes: unversioned, as before fencing
// met optimistic writers. Versioned is the same table with its version
// column.
var (
	Accounts  = fenced.Table{Name: "accounts"}
	Versioned = fenced.Table{Name: "accounts", VersionColumn: "version"}
)

// Set returns the assignments of the suite's writes.
func Set(owner string, amount int64) map[string]any {
	return map[string]any{"owner": owner, "amount": amount}
}

func read(t *testing.T, ctx context.Context, d Dialect, key int64) (string, int64, int64, int64) {
	t.Helper()
	o, a, tk, v, err := d.Read(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return o, a, tk, v
}

// Write: equal tokens pass, lower ones are stale and change nothing, a
// token-only write advances the token.
func Write(t *testing.T, d Dialect) {
	ctx := t.Context()
	steps := []struct {
		name   string
		tok    fenced.Token
		owner  string
		want   error
		wantOw string // row after the step
		wantTk int64
	}{
		{"new row", 5, "a", nil, "a", 5},
		{"equal token passes", 5, "a2", nil, "a2", 5},
		{"equal token, identical values", 5, "a2", nil, "a2", 5},
		{"higher token passes", 9, "b", nil, "b", 9},
		{"lower token is stale", 7, "stale", fenced.ErrStaleToken, "b", 9},
		{"much lower token is stale", 1, "stale", fenced.ErrStaleToken, "b", 9},
		{"equal token after a stale one", 9, "b2", nil, "b2", 9},
	}
	for _, s := range steps {
		err := d.Write(ctx, Accounts, 1, s.tok, Set(s.owner, int64(s.tok)))
		if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("%s: write = %v, want %v", s.name, err, s.want)
		}
		if owner, _, tok, _ := read(t, ctx, d, 1); owner != s.wantOw || tok != s.wantTk {
			t.Fatalf("%s: row = (%q, %d), want (%q, %d)", s.name, owner, tok, s.wantOw, s.wantTk)
		}
	}
	// A write with no columns only advances the token.
	if err := d.Write(ctx, Accounts, 1, 12, nil); err != nil {
		t.Fatal(err)
	}
	if owner, _, tok, _ := read(t, ctx, d, 1); owner != "b2" || tok != 12 {
		t.Fatalf("token-only write: row = (%q, %d)", owner, tok)
	}
}

// Update: a missing row is ErrNotFound; a row from before fencing (token
// 0) is updated; equal passes, lower is stale.
func Update(t *testing.T, d Dialect) {
	ctx := t.Context()
	if err := d.Update(ctx, Accounts, 1, 3, Set("x", 1)); !errors.Is(err, fenced.ErrNotFound) {
		t.Fatalf("update of a missing row = %v", err)
	}
	if err := d.Exec(ctx, "INSERT INTO accounts (id, owner) VALUES (1, 'legacy')"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		tok  fenced.Token
		want error
	}{{3, nil}, {3, nil}, {2, fenced.ErrStaleToken}, {4, nil}} {
		if err := d.Update(ctx, Accounts, 1, s.tok, Set("o", 1)); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("update token %d = %v, want %v", s.tok, err, s.want)
		}
	}
	if owner, _, tok, _ := read(t, ctx, d, 1); owner != "o" || tok != 4 {
		t.Fatalf("row = (%q, %d)", owner, tok)
	}
}

// ConcurrentWritersMaxTokenWins: many writers with random tokens race on
// one row; whatever the interleaving, the row ends with the data of the
// highest token, and the writer of the max token was accepted.
func ConcurrentWritersMaxTokenWins(t *testing.T, d Dialect) {
	ctx := t.Context()
	const writers = 24
	for round := range 3 {
		key := int64(round + 1)
		tokens := rand.Perm(1000)[:writers]
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, writers)
		for i, tk := range tokens {
			wg.Go(func() {
				<-start
				tok := fenced.Token(tk + 1)
				errs[i] = d.Write(ctx, Accounts, key, tok, Set(fmt.Sprint("w", tok), int64(tok)))
			})
		}
		close(start)
		wg.Wait()
		maxTok := int64(slices.Max(tokens) + 1)
		for i, err := range errs {
			if err != nil && !errors.Is(err, fenced.ErrStaleToken) {
				t.Fatalf("writer %d: %v", i, err)
			}
			if int64(tokens[i]+1) == maxTok && err != nil {
				t.Fatalf("the max-token writer was rejected: %v", err)
			}
		}
		owner, amount, tok, _ := read(t, ctx, d, key)
		if tok != maxTok || amount != maxTok || owner != fmt.Sprint("w", maxTok) {
			t.Fatalf("round %d: row = (%q, %d, %d), want the max token %d's data", round, owner, amount, tok, maxTok)
		}
	}
}

// BadInputCase is an argument error every guarded write refuses before any
// I/O.
type BadInputCase struct {
	Name  string
	Table fenced.Table
	Token fenced.Token
	Set   map[string]any
	Want  error // every case also matches concurkit.ErrInvalidArgument
}

// BadInput lists the cases. (A column assigned twice, a case of the old
// []Set API, cannot be expressed with a map.)
var BadInput = []BadInputCase{
	{"zero token", Accounts, 0, nil, fenced.ErrInvalidToken},
	{"negative token", Accounts, -5, nil, fenced.ErrInvalidToken},
	{"empty table", fenced.Table{}, 1, nil, concurkit.ErrInvalidArgument},
	{"NUL in table", fenced.Table{Name: "a\x00b"}, 1, nil, concurkit.ErrInvalidArgument},
	{"NUL in schema", fenced.Table{Schema: "s\x00", Name: "t"}, 1, nil, concurkit.ErrInvalidArgument},
	{"too long column", Accounts, 1, map[string]any{strings.Repeat("c", 70): 1}, concurkit.ErrInvalidArgument},
	{"empty column", Accounts, 1, map[string]any{"": 1}, concurkit.ErrInvalidArgument},
	{"set the token column", Accounts, 1, map[string]any{"max_seen_token": 1}, concurkit.ErrInvalidArgument},
	{"set the key column", Accounts, 1, map[string]any{"id": 1}, concurkit.ErrInvalidArgument},
	{"set the version column", Versioned, 1, map[string]any{"version": 1}, concurkit.ErrInvalidArgument},
	{"key equals token column", fenced.Table{Name: "t", KeyColumn: "k", TokenColumn: "k"}, 1, nil, concurkit.ErrInvalidArgument},
	{"version equals token column", fenced.Table{Name: "t", VersionColumn: "max_seen_token"}, 1, nil, concurkit.ErrInvalidArgument},
	{"version equals key column", fenced.Table{Name: "t", VersionColumn: "id"}, 1, nil, concurkit.ErrInvalidArgument},
	{"NUL in version column", fenced.Table{Name: "t", VersionColumn: "v\x00"}, 1, nil, concurkit.ErrInvalidArgument},
}

// CheckBadInput runs every BadInput case through write (which must not
// reach the server: the cases' tables do not exist).
func CheckBadInput(t *testing.T, write func(t fenced.Table, tok fenced.Token, set map[string]any) error) {
	for _, c := range BadInput {
		err := write(c.Table, c.Token, c.Set)
		if !errors.Is(err, c.Want) || !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want %v (and concurkit.ErrInvalidArgument)", c.Name, err, c.Want)
		}
	}
}

// VersionBump: with Table.VersionColumn, every accepted fenced write bumps
// the version (an insert starts at 1 whatever the column's default), a
// refused one does not, and an optimistic compare-and-swap that read the
// row before a fenced write then fails instead of overwriting it.
func VersionBump(t *testing.T, d Dialect) {
	ctx := t.Context()
	version := func() int64 { _, _, _, v := read(t, ctx, d, 1); return v }
	step := func(what string, err error, want error, wantVersion int64) {
		t.Helper()
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		if v := version(); v != wantVersion {
			t.Fatalf("%s: version %d, want %d", what, v, wantVersion)
		}
	}
	// The column's default is 0, which a CAS refuses as a version: the
	// fenced insert must store 1.
	step("fenced insert", d.Write(ctx, Versioned, 1, 5, Set("a", 100)), nil, 1)

	// The optimistic writer reads version 1; the fenced job writes (token
	// 5 again) before the CAS lands.
	seen := version()
	step("fenced write, equal token", d.Write(ctx, Versioned, 1, 5, Set("job", 90)), nil, 2)
	if n, err := d.CAS(ctx, 1, seen, 7); err != nil || n != 0 {
		t.Fatalf("CAS with the version read before the fenced write: %d rows, %v; want 0 (a conflict)", n, err)
	}
	if _, amount, _, _ := read(t, ctx, d, 1); amount != 90 {
		t.Fatalf("amount %d after the refused CAS, want the fenced write's 90", amount)
	}
	// Re-read, retry: the CAS applies on top of the fenced write.
	if n, err := d.CAS(ctx, 1, version(), 7); err != nil || n != 1 {
		t.Fatalf("CAS with the current version: %d rows, %v; want 1", n, err)
	}
	step("after the CAS", nil, nil, 3)

	// Identical values with an equal token still bump the version: the
	// CAS writers must see that a fenced writer was here.
	step("identical values", d.Write(ctx, Versioned, 1, 5, Set("job", 97)), nil, 4)
	step("stale write", d.Write(ctx, Versioned, 1, 4, Set("stale", 0)), fenced.ErrStaleToken, 4)
	step("token-only write", d.Write(ctx, Versioned, 1, 6, nil), nil, 5)

	seen = version()
	step("fenced update", d.Update(ctx, Versioned, 1, 6, map[string]any{"amount": 50}), nil, 6)
	if n, err := d.CAS(ctx, 1, seen, 1); err != nil || n != 0 {
		t.Fatalf("CAS after a fenced Update: %d rows, %v; want 0 (a conflict)", n, err)
	}
	step("stale update", d.Update(ctx, Versioned, 1, 2, map[string]any{"amount": 0}), fenced.ErrStaleToken, 6)
	step("unversioned table leaves the version alone", d.Write(ctx, Accounts, 1, 7, Set("plain", 1)), nil, 6)
	if owner, amount, tok, _ := read(t, ctx, d, 1); owner != "plain" || amount != 1 || tok != 7 {
		t.Fatalf("row = (%q, %d, %d)", owner, amount, tok)
	}
	if err := d.Update(ctx, Versioned, 2, 9, nil); !errors.Is(err, fenced.ErrNotFound) {
		t.Fatalf("versioned update of a missing row = %v", err)
	}
}

// ErrRollback is returned by an Admit step that must not commit.
var ErrRollback = errors.New("rollback")

// AdmitSequence runs admit(token, commit) through the fence rules: equal
// passes, lower fails, a rolled-back admission is not recorded.
func AdmitSequence(t *testing.T, admit func(fenced.Token, bool) error) {
	t.Helper()
	steps := []struct {
		tok    fenced.Token
		commit bool
		want   error
	}{
		{5, true, nil},
		{5, true, nil},                  // equal passes
		{4, true, fenced.ErrStaleToken}, // lower fails
		{20, false, ErrRollback},        // admitted, then rolled back: not recorded
		{15, true, nil},                 // so 15 still passes
		{14, true, fenced.ErrStaleToken},
	}
	for i, s := range steps {
		if err := admit(s.tok, s.commit); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("step %d (token %d): %v, want %v", i, s.tok, err, s.want)
		}
	}
}

// Source draws tokens from 8 goroutines: all distinct, positive, and
// increasing within each goroutine (each call starts after the previous
// one returned).
func Source(t *testing.T, src fenced.Source) {
	t.Helper()
	const workers, per = 8, 40
	got := make([][]fenced.Token, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range per {
				tok, err := src.Next(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], tok)
			}
		})
	}
	wg.Wait()
	seen := map[fenced.Token]bool{}
	for _, toks := range got {
		if len(toks) != per {
			t.Fatalf("got %d tokens, want %d", len(toks), per)
		}
		for i, tok := range toks {
			if !tok.Valid() || seen[tok] || (i > 0 && tok <= toks[i-1]) {
				t.Fatalf("bad token sequence %v", toks)
			}
			seen[tok] = true
		}
	}
}

// StripQuoted removes every quoted identifier (quote char q, doubled to
// escape) and reports false if a quote is left open: the fuzz targets
// compare statements built from arbitrary names with this.
func StripQuoted(s string, q byte) (string, bool) {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case !in && c == q:
			in = true
			b.WriteString("@")
		case in && c == q && i+1 < len(s) && s[i+1] == q:
			i++
		case in && c == q:
			in = false
		case !in:
			b.WriteByte(c)
		}
	}
	return b.String(), !in
}

// Rejections returns ctx with a FenceRejected hook that records every
// event, and a function that returns the events recorded so far.
func Rejections(ctx context.Context) (context.Context, func() []observe.FenceEvent) {
	var mu sync.Mutex
	var events []observe.FenceEvent
	ctx = observe.WithHooks(ctx, &observe.Hooks{FenceRejected: func(_ context.Context, e observe.FenceEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}})
	return ctx, func() []observe.FenceEvent {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events)
	}
}

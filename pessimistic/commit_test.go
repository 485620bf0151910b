package pessimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/testkit"
)

// cutProxy forwards TCP connections to a server until cut is set; from then
// on it swallows whatever a client sends and drops both sides, so a COMMIT
// is written successfully by the client but never reaches the server and no
// answer comes back: the outcome is unknown to the client.
type cutProxy struct {
	ln    net.Listener
	cut   atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(c, s); c.Close() })
			p.wg.Go(func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if p.cut.Load() {
						c.Close()
						s.Close()
						return
					}
					if n > 0 {
						if _, werr := s.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						s.Close()
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() (string, uint16) {
	a := p.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), uint16(a.Port)
}

func TestAmbiguousCommitPostgres(t *testing.T) {
	pool := pgPool(t, 2) // creates the schema and tables
	ctx := t.Context()
	cfg := pool.Config().ConnConfig.Copy()
	p := startProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	cfg.Host, cfg.Port = p.addr()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	calls := 0
	err = pessimisticpg.InTx(ctx, conn, nil, func(ctx context.Context, tx pgx.Tx) error {
		calls++
		if _, err := tx.Exec(ctx, "INSERT INTO counters (id, value) VALUES (7, 7)"); err != nil {
			return err
		}
		p.cut.Store(true) // the COMMIT that follows is lost
		return nil
	})
	var amb *concurkit.AmbiguousCommitError
	if !errors.As(err, &amb) || amb.Err == nil {
		t.Fatalf("err = %v, want *AmbiguousCommitError", err)
	}
	if calls != 1 {
		t.Errorf("fn ran %d times; an ambiguous commit must not be retried", calls)
	}
	t.Logf("ambiguous commit: %v", err)
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM counters WHERE id = 7").Scan(&n); err != nil || n != 0 {
		t.Errorf("row visible (%d, %v): the server never got COMMIT", n, err)
	}
}

func TestAmbiguousCommitMariaDB(t *testing.T) {
	dsn := testkit.MySQLDSN(t)
	direct, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ctx := t.Context()
	if _, err := direct.ExecContext(ctx, myDDL); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, cfg.Addr)
	host, port := p.addr()
	cfg.Addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	calls := 0
	err = pessimisticmysql.InTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
		calls++
		if _, err := tx.ExecContext(ctx, "INSERT INTO counters (id, value) VALUES (7, 7)"); err != nil {
			return err
		}
		p.cut.Store(true)
		return nil
	})
	var amb *concurkit.AmbiguousCommitError
	if !errors.As(err, &amb) || amb.Err == nil {
		t.Fatalf("err = %v, want *AmbiguousCommitError", err)
	}
	if calls != 1 {
		t.Errorf("fn ran %d times; an ambiguous commit must not be retried", calls)
	}
	t.Logf("ambiguous commit: %v", err)
	var n int
	if err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM counters WHERE id = 7").Scan(&n); err != nil || n != 0 {
		t.Errorf("row visible (%d, %v): the server never got COMMIT", n, err)
	}
}

// TestPanicRollsBack: a panic in fn rolls the transaction back, then is
// re-raised with its value; the handle stays usable.
func TestPanicRollsBack(t *testing.T) {
	repanicked := func(t *testing.T, f func()) (v any) {
		t.Helper()
		defer func() { v = recover() }()
		f()
		return nil
	}
	t.Run("Postgres", func(t *testing.T) {
		pool := pgPool(t, 2)
		ctx := t.Context()
		v := repanicked(t, func() {
			_ = pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO counters (id) VALUES (1)"); err != nil {
					return err
				}
				panic("boom")
			})
		})
		if v != "boom" {
			t.Fatalf("recovered %v, want boom", v)
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM counters").Scan(&n); err != nil || n != 0 {
			t.Errorf("count = %d, %v; want 0 (rolled back)", n, err)
		}
		if s := pool.Stat(); s.AcquiredConns() != 0 {
			t.Errorf("%d connections still acquired", s.AcquiredConns())
		}
	})
	t.Run("MariaDB", func(t *testing.T) {
		db := myDB(t, 2)
		ctx := t.Context()
		v := repanicked(t, func() {
			_ = pessimisticmysql.InTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO counters (id) VALUES (1)"); err != nil {
					return err
				}
				panic("boom")
			})
		})
		if v != "boom" {
			t.Fatalf("recovered %v, want boom", v)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM counters").Scan(&n); err != nil || n != 0 {
			t.Errorf("count = %d, %v; want 0 (rolled back)", n, err)
		}
		if s := db.Stats(); s.InUse != 0 {
			t.Errorf("%d connections still in use", s.InUse)
		}
	})
}

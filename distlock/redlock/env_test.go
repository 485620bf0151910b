package redlock_test

// Stopgap until internal/testenv is committed: the same shapes as
// testenv.Redlock, testenv.Postgres and testenv.StartRedis.

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/fenced"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func redlockEnv(t testing.TB) ([]*goredis.Client, string) {
	t.Helper()
	addrs := strings.Split(envOr("CONCURKIT_REDLOCK_ADDRS", "127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382,127.0.0.1:16383,127.0.0.1:16384"), ",")
	var cs []*goredis.Client
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Skipf("redis %s unreachable (run scripts/services.sh up): %v", a, err)
		}
		cs = append(cs, c)
	}
	return cs, "t:" + strings.ToLower(rand.Text()[:10]) + ":"
}

func tokenSource(t testing.TB) (*pgxpool.Pool, fenced.Source) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, envOr("CONCURKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Skipf("postgres unreachable (run scripts/services.sh up): %v", err)
	}
	name := "seq_" + strings.ToLower(rand.Text()[:12])
	if err := fenced.CreatePostgresSequence(ctx, pool, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SEQUENCE IF EXISTS "+name) })
	src, err := fenced.NewPostgresSequence(pool, name)
	if err != nil {
		t.Fatal(err)
	}
	return pool, src
}

// proc is a private throwaway redis-server (same shape as testenv.Proc).
type proc struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
}

func startRedis(t testing.TB, n int) []*proc {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (run scripts/services.sh up)")
	}
	ps := make([]*proc, n)
	for i := range ps {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		ps[i] = &proc{Addr: addr, dir: t.TempDir()}
		ps[i].Start(t)
		t.Cleanup(func() { ps[i].Kill(t) })
	}
	return ps
}

func (p *proc) Start(t testing.TB) {
	t.Helper()
	_, port, _ := net.SplitHostPort(p.Addr)
	p.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", p.dir)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: p.Addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c.Ping(context.Background()).Err() == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("redis-server on %s not ready", p.Addr))
		}
	}
}

func (p *proc) Kill(t testing.TB) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

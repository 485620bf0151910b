package testkit

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Containers started here live as long as the test process; testcontainers'
// reaper (Ryuk) removes them when the process exits.

var docker struct {
	once sync.Once
	err  error
}

// dockerHealthy reports whether a Docker engine answers, once per process.
// Without an engine it returns an error within milliseconds.
func dockerHealthy(ctx context.Context) error {
	docker.once.Do(func() {
		docker.err = func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("testcontainers panicked: %v", r)
				}
			}()
			p, err := testcontainers.ProviderDefault.GetProvider()
			if err != nil {
				return err
			}
			defer func() { _ = p.Close() }()
			return p.Health(ctx)
		}()
	})
	return docker.err
}

func postgresContainer(ctx context.Context) (string, error) {
	c, err := tcpostgres.Run(ctx, "postgres:15-alpine",
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
		testcontainers.WithCmdArgs("-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=500"),
	)
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

func mysqlContainer(ctx context.Context) (string, error) {
	c, err := tcmysql.Run(ctx, "mariadb:10.11",
		tcmysql.WithUsername("root"),
		tcmysql.WithPassword(""),
		testcontainers.WithCmdArgs("--max-connections=500", "--innodb-flush-log-at-trx-commit=0"),
		// The entrypoint starts a temporary server first, then the real one.
		testcontainers.WithWaitStrategy(wait.ForLog("ready for connections").WithOccurrence(2)),
	)
	if err != nil {
		return "", err
	}
	dsn, err := c.ConnectionString(ctx)
	if err != nil {
		return "", err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	cfg.DBName = ""
	return cfg.FormatDSN(), nil
}

func redisContainer(ctx context.Context) (string, error) {
	c, err := tcredis.Run(ctx, "redis:7")
	if err != nil {
		return "", err
	}
	s, err := c.ConnectionString(ctx)
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(s, "redis://"), nil
}

// redlockContainers starts five independent Redis masters.
func redlockContainers(ctx context.Context) (string, error) {
	addrs := make([]string, 0, redlockNodes)
	for range redlockNodes {
		a, err := redisContainer(ctx)
		if err != nil {
			return "", err
		}
		addrs = append(addrs, a)
	}
	return strings.Join(addrs, ","), nil
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// waitReady waits, up to serverDown, until the run's PostgreSQL takes
// queries: a restarted PostgreSQL accepts connections before it has
// recovered, and refuses them meanwhile (SQLSTATE 57P03, "the database
// system is starting up"), so a run that ends right after NemesisServerKill
// would check — and the next run set up — against a server not yet back.
// Any other error is returned at once (a wrong endpoint fails fast).
func waitReady(ctx context.Context, systems []string, eps Endpoints) error {
	if eps.Postgres == "" || !slices.Contains(systems, "postgres") {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, serverDown)
	defer cancel()
	for {
		err := pgPing(ctx, eps.Postgres)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case !(errors.As(err, &pgErr) && pgErr.Code == "57P03") && !errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("chaos: postgres: %w", err)
		}
		if serr := sleepCtx(ctx, 100*time.Millisecond); serr != nil {
			return fmt.Errorf("chaos: postgres not back after a restart: %w", errors.Join(err, serr))
		}
	}
}

func pgPing(ctx context.Context, url string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return c.Ping(ctx)
}

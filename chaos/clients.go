package chaos

import (
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	goredis "github.com/redis/go-redis/v9"
)

// mysqlOptions are the MySQL/MariaDB session settings every workload on
// that backend honours (env.Options), so that a run can be made under the
// configurations where past defects hid:
//   - sql_mode: modes added to the session's sql_mode on every connection,
//     comma-separated (e.g. "SIMULTANEOUS_ASSIGNMENT");
//   - interpolateParams, clientFoundRows: "true" or "false", the driver
//     options of that name; default the DSN's.
type mysqlOptions struct {
	sqlModes        []string
	interpolate     *bool // nil: the DSN's setting
	clientFoundRows *bool // nil: the DSN's setting
}

// mysqlSQLMode is one sql_mode name: it goes into a SET statement.
var mysqlSQLMode = regexp.MustCompile(`^[A-Z_]+$`)

// parseMySQLOptions reads mysqlOptions from m; a bad value is an error
// matching ErrInvalidConfig.
func parseMySQLOptions(m map[string]string) (mysqlOptions, error) {
	var o mysqlOptions
	bad := func(key, why string) error {
		return fmt.Errorf("%w: mysql option %s=%q: %s", ErrInvalidConfig, key, m[key], why)
	}
	if v := m["sql_mode"]; v != "" {
		for mode := range strings.SplitSeq(v, ",") {
			mode = strings.ToUpper(strings.TrimSpace(mode))
			if !mysqlSQLMode.MatchString(mode) {
				return o, bad("sql_mode", "want comma-separated mode names")
			}
			o.sqlModes = append(o.sqlModes, mode)
		}
	}
	for _, b := range []struct {
		key string
		dst **bool
	}{{"interpolateParams", &o.interpolate}, {"clientFoundRows", &o.clientFoundRows}} {
		if v, ok := m[b.key]; ok {
			x, err := strconv.ParseBool(v)
			if err != nil {
				return o, bad(b.key, "want true or false")
			}
			*b.dst = &x
		}
	}
	return o, nil
}

// apply sets o on cfg, and I/O timeouts where the DSN has none: the
// driver gives COMMIT no context, so without them a frozen server would
// hold a client forever.
func (o mysqlOptions) apply(cfg *mysql.Config, timeout time.Duration) {
	if cfg.Timeout == 0 {
		cfg.Timeout = timeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = timeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = timeout
	}
	if o.interpolate != nil {
		cfg.InterpolateParams = *o.interpolate
	}
	if o.clientFoundRows != nil {
		cfg.ClientFoundRows = *o.clientFoundRows
	}
	if len(o.sqlModes) > 0 {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		// The driver sends each DSN parameter as SET name = value on
		// every new connection; the modes were checked to be bare names.
		cfg.Params["sql_mode"] = "CONCAT(@@sql_mode, '," + strings.Join(o.sqlModes, ",") + "')"
	}
}

// redisOptions are a client process's go-redis options for addr: the
// library's defaults (its own retries included: a retried command the
// server already applied is one of the faults under test), and
// ContextTimeoutEnabled when Options["redis_context_timeout"] is "true"
// (go-redis then bounds each command by its context's deadline instead of
// its read and write timeouts alone).
func redisOptions(e *env, addr string) *goredis.Options {
	on, _ := strconv.ParseBool(e.Options["redis_context_timeout"])
	return &goredis.Options{Addr: addr, ContextTimeoutEnabled: on}
}

// openMySQL opens dsn on database db ("" for none) with I/O timeouts:
// the driver gives some calls no context, and a frozen server would hold
// them forever.
func openMySQL(dsn, db string, timeout time.Duration, o mysqlOptions) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("chaos: mysql dsn: %w", err)
	}
	cfg.DBName = db
	o.apply(cfg, timeout)
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: mysql dsn: %w", err)
	}
	return sql.OpenDB(c), nil
}

package durabilitymysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"

	_ "github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/durability/durabilitymysql"
)

// A node of a Galera cluster: each commit reaches every node before it is
// acknowledged, so Check finds nothing to report. (The example connects to
// the first node of scripts/services.sh's replicated profile, or of
// CONCURKIT_GALERA_DSNS.)
func ExampleCheck() {
	ctx := context.Background()
	dsn := "root@tcp(127.0.0.1:13311)/"
	if v := os.Getenv("CONCURKIT_GALERA_DSNS"); v != "" {
		dsn, _, _ = strings.Cut(v, ",")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	fmt.Println(durabilitymysql.Check(ctx, db))
	// Output: <nil>
}

package optimistic_test

import (
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/testkit"
)

// TestUpdateClientFoundRows shows the MySQL CAS does not depend on the
// affected-rows semantics that the clientFoundRows DSN option changes.
func TestUpdateClientFoundRows(t *testing.T) {
	t.Parallel()
	cfg, err := mysql.ParseDSN(testkit.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = true
	db := testkit.MySQLFor(t, cfg.FormatDSN())
	if _, err := db.ExecContext(t.Context(), myInventory); err != nil {
		t.Fatal(err)
	}
	checkUpdate(t, myStore(db, "inventory", "stock"))
}

// Package galera gives the MariaDB/MySQL adapters what they need on a
// MariaDB Galera cluster, where every node takes writes: to know that they
// talk to one, and causal statements where a decision must see the
// newest commit.
//
// On Galera a node applies the other nodes' commits a moment after they
// returned, and with wsrep_sync_wait = 0 (the default) a statement runs on
// the node's copy as it is: a read may miss a commit made on another node
// a moment ago, even by the same client. Writes are safe all the same —
// of two write sets that touch one row, certification refuses the later
// (1213 at COMMIT) — but a statement that decides without writing (a read,
// an UPDATE or INSERT … ON DUPLICATE KEY UPDATE that finds nothing to
// change) is not certified, and can decide on old rows. Causal makes such
// a statement wait until the node has applied everything the cluster
// committed before it began.
package galera

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
)

// Statement kinds of wsrep_sync_wait, a bit mask: a statement of a kind in
// the mask waits for the node to catch up with the cluster first.
const (
	Read   = 1 // SELECT, SHOW, BEGIN
	Update = 2 // UPDATE, DELETE
	Insert = 4 // INSERT, REPLACE (INSERT … ON DUPLICATE KEY UPDATE included)
)

const (
	wsrepOn = "SELECT @@GLOBAL.wsrep_on"
	barrier = "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1"
	// erUnknownSystemVariable: MySQL, or MariaDB built without wsrep.
	erUnknownSystemVariable = 1193
)

// Causal returns query prefixed with MariaDB's SET STATEMENT
// wsrep_sync_wait = kinds FOR: on a Galera node, a statement of one of
// kinds first waits until the node has applied every transaction the
// cluster committed before it began (wsrep_sync_wait's causality check),
// so it sees what a single server would. Only on a server where On is
// true: SET STATEMENT is MariaDB syntax, and the variable exists only
// where wsrep was built in. MariaDB ignores the wait inside a transaction
// (it applies to autocommit statements and to the first statement of a
// transaction only when set for the session before BEGIN): use Barrier
// before a transaction.
func Causal(query string, kinds int) string {
	return fmt.Sprintf("SET STATEMENT wsrep_sync_wait = %d FOR %s", kinds, query)
}

// MaybeCausal is Causal inside a MariaDB executable comment (/*M!100300
// … */), for a statement that must be causal on Galera without asking the
// server what it is: MySQL reads the prefix as a comment; MariaDB applies
// it, a wait that does nothing on a server without Galera — but a MariaDB
// built without wsrep (on Windows) refuses the unknown variable, which
// UnknownVariable recognises: run the plain statement then.
func MaybeCausal(query string, kinds int) string {
	return fmt.Sprintf("/*M!100300 SET STATEMENT wsrep_sync_wait = %d FOR */ %s", kinds, query)
}

// UnknownVariable reports whether err is the server's "unknown system
// variable" (1193): MySQL, or a MariaDB built without wsrep, asked about
// wsrep.
func UnknownVariable(err error) bool { return mysqlerr.Number(err) == erUnknownSystemVariable }

// On reports whether db's server is a Galera node with replication on
// (@@GLOBAL.wsrep_on). A server without the variable — MySQL, a MariaDB
// built without wsrep — is not one. Other errors are returned.
func On(ctx context.Context, db sqldb.DBTX) (bool, error) {
	var on bool
	err := db.QueryRowContext(ctx, wsrepOn).Scan(&on)
	if UnknownVariable(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("is the server a Galera node: %w", err)
	}
	return on, nil
}

// Node remembers On for a long-lived handle (a Store): the first call
// asks the server, later ones answer from memory. The zero Node has not
// asked yet; it is safe for concurrent use.
type Node struct {
	state atomic.Int32 // 0 unknown, 1 not Galera, 2 Galera
}

// On is On(ctx, db), asked once: an error is returned and not remembered.
func (n *Node) On(ctx context.Context, db sqldb.DBTX) (bool, error) {
	switch n.state.Load() {
	case 1:
		return false, nil
	case 2:
		return true, nil
	}
	on, err := On(ctx, db)
	if err != nil {
		return false, err
	}
	if on {
		n.state.Store(2)
	} else {
		n.state.Store(1)
	}
	return on, nil
}

// Barrier waits, on db's node, until the node has applied everything the
// cluster committed before the call: a transaction that db (a
// connection, not a pool) begins afterwards starts from rows at least that
// new. Only on a Galera node (On).
func Barrier(ctx context.Context, db sqldb.DBTX) error {
	var one int
	if err := db.QueryRowContext(ctx, barrier).Scan(&one); err != nil {
		return fmt.Errorf("wait for the cluster (wsrep_sync_wait): %w", err)
	}
	return nil
}

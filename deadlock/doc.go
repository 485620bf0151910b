// Package deadlock simulates strict two-phase locking (2PL) and the ways
// databases keep it live: deadlock detection on a wait-for graph and the
// prevention/avoidance policies wait-die, wound-wait, no-wait and lock
// timeout.
//
// It is pure Go and imports no database driver; its tests replay the same
// lock schedules against PostgreSQL and MariaDB and check that the deadlocks
// the servers report are exactly the ones the simulator finds.
package deadlock

// Package handle checks the handles callers pass to the library (database
// pools, connections and transactions, Redis clients, token sources), so
// that a nil one is reported as a clear error at the entry point instead of
// panicking deep inside a driver.
package handle

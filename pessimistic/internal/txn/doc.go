// Package txn is the driver-neutral machinery the pessimistic adapters
// (pessimisticpg, pessimisticmysql) share, written once: the transaction
// retry loop against a four-method Tx (each adapter asserts
// `var _ txn.Tx = …` for its own transaction type), the mapping of an error
// whose sqlerr.Class the adapter computed to pessimistic's sentinels, the
// resolution of pessimistic.Options, the checks and names of LockRows and
// ClaimJobs, and the observe events of lock statements.
//
// Like the pessimistic core it imports only the standard library and
// concurkit's stdlib-only packages; it is internal so that none of this
// becomes public API.
package txn

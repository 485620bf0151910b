// Package dynamodb is a distlock backend on one DynamoDB item per lock.
//
// A lease is taken with one conditional UpdateItem that sets the item's
// owner (a random per-lease secret), a fresh record version number (RVN)
// and the lease duration, and ADDs 1 to the item's token counter in the
// same write: the new counter value is the fencing token. The item is never
// deleted (Release removes only the owner), so the counter keeps rising
// across holders.
//
// Expiry is judged by duration observed locally, never by comparing clocks
// across machines: a waiter that finds the lock held notes the RVN and the
// lease duration it reads, and only if the RVN is still the same after it
// has itself watched that duration pass may it take the lock over, with a
// write conditioned on that RVN. The holder stops earlier: its lease
// context ends at acquisition start + TTL − drift − margin.
//
// Heartbeats (Extend, AutoExtend) write a new RVN on the condition that the
// owner is still this lease's secret. Conditioning on the owner, not on the
// previous RVN, is what makes an ambiguous heartbeat harmless
// (dynamolock#280): if a heartbeat times out after DynamoDB applied it, the
// retry still matches (the owner is unchanged), where a condition on the
// old RVN would fail and wrongly report the lease lost. Only this lease
// knows its 128-bit owner secret, so the condition admits no one else. The
// same secret resolves an ambiguous acquisition: a retry that finds the
// item owned by its own secret knows it holds the lock.
package dynamodb

// Package election elects one leader among candidates that campaign on
// the same name, on any concurkit lock backend, and gives each leader a
// term that storage can check: the term is the fencing token of the
// leader's lease, strictly increasing across the leaders of one election.
//
// Leader election is a lock held for as long as the leader lives: Campaign
// blocks in the backend's Acquire and keeps the lease renewed
// (AutoExtend). What a lock alone does not give — and what most election
// libraries do not either (client-go's leaderelection says so in its
// package doc) — is protection from a deposed leader that does not know it
// yet: a process paused past its TTL, cut off from the lock service, or
// slow to notice that its session ended keeps acting as leader while its
// successor already acts. The term closes that gap: the leader writes
// through package fenced with Term.Number, and storage refuses a write
// whose term is lower than one it has accepted. The Term's Context ends
// when the lease does (ErrLeadershipLost, joined with the lease's cause),
// before the backend may elect a successor — a leader that stops on that
// signal never overlaps its successor, and one that does not is stopped by
// the fence.
//
// # Backends
//
// Any distlock.Locker works; the guarantees are the backend's: etcd,
// ZooKeeper and PostgreSQL (pglock) end a leader's session on the server
// side and hand leadership over without waiting for a clock; DynamoDB,
// Redis and Redlock do by TTL and the leader's clock bound. A Redis
// without persistence forgets leaders when it restarts (two leaders at
// once); their terms still differ, and the fence still holds.
//
// # Observing
//
// The lock says who may lead; it does not say who leads, nor with what
// value. A Board (electionpg.Board on PostgreSQL) keeps the leader's
// proclamation — its term and a value, for example its address — written
// with the term as a fencing token, so a deposed leader cannot overwrite
// its successor's. Campaign proclaims the candidate's value when it is
// elected, Term.Proclaim changes it, Resign marks the term ended, and
// Observe streams changes to anyone, candidate or not. A leader that dies
// without resigning stays on the board until its successor proclaims
// (within about one TTL plus the time to elect).
//
// # Running a job while leader
//
// Lead is the cron-job helper: it campaigns, runs a function with the
// term's context while leader, and, when leadership is lost, campaigns
// again after a jittered backoff; it returns when the function returns
// while still leader, or when its context ends.
package election

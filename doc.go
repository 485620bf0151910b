// Package concurkit is the root of a toolkit for database concurrency
// control: optimistic compare-and-swap, pessimistic row and advisory locks,
// fencing tokens, create-once writes, distributed leases that carry fencing
// tokens, and a two-phase-locking simulator. This package holds only what
// every other package shares: the bad-input sentinel, the outcome-unknown
// sentinel and its typed error. The README says which tool fits which
// problem.
//
// # Layout: dependencies follow use
//
// Each concept is a package whose core imports only the standard library
// (its types, sentinel errors, retry loop and documentation), and one thin
// adapter package per driver family beneath it, named concept + driver:
//
//	optimistic   optimistic/optimisticpg   optimistic/optimisticmysql   optimistic/optimisticdynamo
//	upsert       upsert/upsertpg           upsert/upsertmysql           upsert/upsertdynamo
//	fenced       fenced/fencedpg           fenced/fencedmysql           fenced/fenceddynamo
//	pessimistic  pessimistic/pessimisticpg pessimistic/pessimisticmysql
//
// "pg" is PostgreSQL through pgx v5, "mysql" is MariaDB and MySQL through
// database/sql and github.com/go-sql-driver/mysql, "dynamo" is DynamoDB
// through aws-sdk-go-v2. A program that imports optimisticpg compiles pgx
// and nothing of the AWS SDK or the MySQL driver. The lock backends of
// package distlock are named after the system that holds the lock:
// distlock/redislock, redlock, etcdlock, zklock, dynamolock and pglock.
// The outbox and inbox also have one adapter per broker, compiling that
// broker's client only: outbox/outboxnats and inbox/inboxnats (NATS
// JetStream), outbox/outboxamqp and inbox/inboxamqp (RabbitMQ).
// Packages retry, observe, distlock, fenced, optimistic, upsert,
// pessimistic and deadlock import only the standard library; deps_test.go
// checks every rule with go list.
//
// # Vocabulary
//
//   - Bad input is one sentinel, ErrInvalidArgument, returned before any
//     I/O: a nil or typed-nil handle, an invalid name, a negative duration,
//     a token or version out of range. A package may add a more specific
//     sentinel made with InvalidArgumentError (distlock.ErrInvalidKey,
//     fenced.ErrInvalidToken) that matches it too.
//   - "It may or may not have happened" is ErrOutcomeUnknown, and the one
//     typed error *AmbiguousCommitError: a COMMIT whose answer was lost, a
//     MySQL statement the context interrupted that could not be confirmed
//     stopped, a lock release the server did not confirm. Nothing retries
//     it blindly.
//   - Handles are the smallest interface that a pool, a connection or a
//     transaction satisfies, with one name per driver family: DBTX (query),
//     Beginner (begin a transaction), Client (DynamoDB).
//   - Tables are described by Table{Schema, Name, KeyColumn, VersionColumn,
//     TokenColumn} (the fields a concept needs); column assignments are a
//     map[string]any; nil or zero options mean documented defaults.
//   - Lock backends are built with New(client, *Config).
//   - Cancellation is joined, never hidden: when the context ends a call,
//     errors.Is(err, context.Canceled) (or DeadlineExceeded) holds as well as
//     the package's own sentinel.
//   - Sentinels carry a short ErrorType() name for metrics (package
//     observe); observe.Hooks report retries, lock waits, lease extensions
//     and losses, fencing rejections and CAS conflicts, and cost nothing when
//     no hooks are installed.
//
// vocabulary_test.go checks these names.
package concurkit

// Package saga runs sagas: ordered steps, each with an action and a
// compensation, whose state is persisted so that a retried or crashed saga
// resumes where it stopped and every effect happens once.
//
// A Definition is a Go value — a name, a version and its steps, made with
// New and NewStep — and Run runs one instance of it, named by a key:
//
//	transfer, err := saga.New("transfer", 1, nil,
//		saga.NewStep("debit", debit, refund),   // action, compensation
//		saga.NewStep("credit", credit, uncredit),
//		saga.NewStep("notify", notify, nil),    // nothing to undo
//	)
//	res, err := transfer.Run(ctx, store, "transfer-42", Transfer{From: "a", To: "b", Amount: 10})
//
// The store is sagapg.Store (PostgreSQL, pgx v5) or sagamysql.Store
// (MariaDB/MySQL), on the table concurkit_sagas of the toolkit migrations;
// this package imports only the standard library.
//
// # What Run guarantees
//
//   - Step keys. Every action and compensation gets its step's key,
//     "<saga key>:<step name>" (Call.Key), the same in every attempt and
//     every run: give it to outside services as their idempotency key.
//   - Resumption. Each step's output is recorded before the next step
//     starts. A retried Run skips done steps; a finished saga returns its
//     stored outcome without calling anything: Result.Output for a
//     completed one, a *FailedError for a compensated one.
//   - Compensation. A step that fails (a permanent error, or retries used
//     up) turns the saga Compensating: the compensations of the done steps
//     run in reverse order, each recorded as it succeeds, so a
//     compensation phase that is interrupted and run again never
//     compensates a step twice and never skips one.
//   - One runner at a time. Run claims the instance with a lease (renewed
//     in the background while a step runs) before it calls anything; a
//     concurrent Run of the same key gets ErrInProgress. A crashed
//     runner's lease expires after Config.LeaseTTL (the clock is
//     Config.Now, injectable for tests). A step's context ends before its
//     lease does (a margin before the end known from the last successful
//     renewal), even while a renewal hangs, so a step that honours its
//     context never overlaps the next runner's. Every record is fenced by
//     the runner's claim, so a runner that lost its lease records nothing
//     more (ErrLeaseLost).
//   - Versions. An instance records its definition's name, version and
//     step names, and only that definition resumes it
//     (ErrDefinitionMismatch). A key names one instance: a retry with
//     another input is refused (ErrInputMismatch).
//
// # What actions must do
//
// A step whose action took effect but whose runner crashed before
// recording it is run again, with the same key: actions and compensations
// run at least once, and must be idempotent by their key (an outside
// service's idempotency key, an insert-if-absent on the key in your
// database). At-least-once plus idempotent by key is effectively once. An
// action that returns an error must have had no effect: a failed step is
// not compensated. Return a retryable error (Retryable, or any error
// retry.IsRetryable accepts) for a transient failure, which Run retries
// under Config.Retry; any other error fails the saga. Compensations are
// retried on any error; one that keeps failing leaves the saga
// Compensating (ErrCompensationFailed) until a later Run finishes it.
//
// A cancelled context stops Run between or during steps without failing
// the saga: the step in progress stays Running and is run again by the
// next Run. A recovery job finds interrupted instances with the adapters'
// Unfinished and runs them again.
//
// # State
//
// An instance is one row: its status (Running → Completed, or Running →
// Compensating → Compensated), the steps as JSON (Pending → Running →
// Done → Compensated, or Failed), their outputs, attempts and errors,
// the claim and the lease. Each transition is one write of that row,
// conditional on the claim: n steps cost n+1 writes after the claim.
// Keep outputs small (identifiers, not documents): the row is rewritten
// at every step.
package saga

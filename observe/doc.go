// Package observe lets an application see what concurkit does on its behalf:
// retries (with the error that caused each), lock waits and polls, lease
// extensions and their failures, lease losses with their cause, fencing
// rejections and compare-and-swap conflicts.
//
// Hooks are a struct of optional callbacks, in the manner of
// net/http/httptrace: install them on a context with WithHooks, and every
// concurkit call made with that context (or a lease acquired with it) reports
// to them. Nothing is reported and nothing is allocated when no hooks are
// installed, which is the default.
//
// Two ready-made Hooks exist: Slog, here, logs each event through a
// log/slog.Logger; the subpackage otelobserve records OpenTelemetry metrics.
//
// The package imports only the standard library.
package observe

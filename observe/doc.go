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
// # Several hooks at once
//
// WithHooks composes: calling it again on a context that already carries
// hooks adds to them, it does not replace them. Every event then reaches
// each installed Hooks in the order they were installed, and a Hooks
// without a callback for an event is skipped. So a service that wants
// Slog's log lines and its own counters nests two calls — no wrapper that
// forwards each callback is needed:
//
//	ctx = observe.WithHooks(ctx, observe.Slog(logger))
//	ctx = observe.WithHooks(ctx, &observe.Hooks{Retry: countRetry}) // Slog still logs
//
// A request handler can likewise add per-request hooks to the server's
// base context; they end with the request's context.
//
// The package imports only the standard library.
package observe

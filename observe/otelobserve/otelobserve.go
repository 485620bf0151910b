// Package otelobserve records concurkit's events (see package observe) as
// OpenTelemetry metrics through the OpenTelemetry metric API. It never
// records a lock key, row key or token as an attribute: attribute values
// come from small fixed sets, so the number of series stays bounded.
//
// Instruments (names and units after the OpenTelemetry semantic
// conventions):
//
//	concurkit.retries              counter    {retry}     concurkit.package, error.type, concurkit.gave_up
//	concurkit.lock.wait.duration   histogram  s           concurkit.package, concurkit.outcome (acquired|not_acquired)
//	concurkit.lease.extensions     counter    {extension} concurkit.package, concurkit.outcome (ok|failed)
//	concurkit.lease.losses         counter    {lease}     concurkit.package, error.type
//	concurkit.fence.rejections     counter    {rejection} concurkit.package
//	concurkit.cas.conflicts        counter    {conflict}  concurkit.package
package otelobserve

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/concurkit/concurkit/observe/otelobserve"

// Attribute keys.
const (
	PackageKey   = attribute.Key("concurkit.package")
	OutcomeKey   = attribute.Key("concurkit.outcome")
	GaveUpKey    = attribute.Key("concurkit.gave_up")
	ErrorTypeKey = attribute.Key("error.type")
)

// New returns Hooks that record metrics with a meter from mp. It returns an
// error matching concurkit.ErrInvalidArgument for a nil mp, and the
// meter's error if an instrument cannot be created.
func New(mp metric.MeterProvider) (*observe.Hooks, error) {
	if mp == nil {
		return nil, errors.Join(concurkit.ErrInvalidArgument, errors.New("otelobserve: nil MeterProvider"))
	}
	m := mp.Meter(ScopeName)
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	retries := counter("concurkit.retries", "{retry}", "Failed attempts of a retry loop that were retried or ended the loop.")
	extensions := counter("concurkit.lease.extensions", "{extension}", "Lease extension attempts.")
	losses := counter("concurkit.lease.losses", "{lease}", "Leases lost or expired before their release.")
	rejections := counter("concurkit.fence.rejections", "{rejection}", "Writes refused for a stale fencing token.")
	conflicts := counter("concurkit.cas.conflicts", "{conflict}", "Compare-and-swap writes that found another version.")
	wait, err := m.Float64Histogram("concurkit.lock.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the first attempt to the outcome of a lock acquisition that had to wait."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &observe.Hooks{
		Retry: func(ctx context.Context, e observe.RetryEvent) {
			retries.Add(ctx, 1, metric.WithAttributes(PackageKey.String(e.Package),
				ErrorTypeKey.String(observe.ErrorType(e.Err)), GaveUpKey.Bool(e.GaveUp)))
		},
		LockWait: func(ctx context.Context, e observe.LockWaitEvent) {
			outcome := "acquired"
			if e.Err != nil {
				outcome = "not_acquired"
			}
			wait.Record(ctx, e.Wait.Seconds(), metric.WithAttributes(PackageKey.String(e.Package), OutcomeKey.String(outcome)))
		},
		LeaseExtend: func(ctx context.Context, e observe.LeaseEvent) {
			outcome := "ok"
			if e.Err != nil {
				outcome = "failed"
			}
			extensions.Add(ctx, 1, metric.WithAttributes(PackageKey.String(e.Package), OutcomeKey.String(outcome)))
		},
		LeaseLost: func(ctx context.Context, e observe.LeaseEvent) {
			losses.Add(ctx, 1, metric.WithAttributes(PackageKey.String(e.Package), ErrorTypeKey.String(observe.ErrorType(e.Err))))
		},
		FenceRejected: func(ctx context.Context, e observe.FenceEvent) {
			rejections.Add(ctx, 1, metric.WithAttributes(PackageKey.String(e.Package)))
		},
		Conflict: func(ctx context.Context, e observe.ConflictEvent) {
			conflicts.Add(ctx, 1, metric.WithAttributes(PackageKey.String(e.Package)))
		},
	}, nil
}

package otelobserve_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/observe/otelobserve"
)

func TestNilProvider(t *testing.T) {
	if _, err := otelobserve.New(nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("New(nil) = %v, want ErrInvalidArgument", err)
	}
}

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h, err := otelobserve.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := observe.WithHooks(t.Context(), h)
	obs := observe.FromContext(ctx)
	boom := errors.New("boom")
	for range 3 {
		obs.OnConflict(ctx, observe.ConflictEvent{Package: "optimisticpg", Table: "accounts"})
	}
	obs.OnRetry(ctx, observe.RetryEvent{Package: "retry", Attempt: 1, Err: boom, Delay: time.Millisecond})
	obs.OnRetry(ctx, observe.RetryEvent{Package: "retry", Attempt: 2, Err: context.Canceled, GaveUp: true})
	obs.OnLockWait(ctx, observe.LockWaitEvent{Package: "redislock", Key: "order-1", Wait: 20 * time.Millisecond})
	obs.OnLockWait(ctx, observe.LockWaitEvent{Package: "redislock", Key: "order-2", Wait: 2 * time.Second, Err: boom})
	obs.OnLeaseExtend(ctx, observe.LeaseEvent{Package: "etcdlock", Key: "k"})
	obs.OnLeaseExtend(ctx, observe.LeaseEvent{Package: "etcdlock", Key: "k", Err: boom})
	obs.OnLeaseLost(ctx, observe.LeaseEvent{Package: "etcdlock", Key: "k", Err: boom})
	obs.OnFenceRejected(ctx, observe.FenceEvent{Package: "fencedpg", Resource: "accounts", Token: 3, Seen: 4})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelobserve.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
			for _, kv := range attrsOf(m) {
				if kv.Key == "key" || kv.Value.AsString() == "order-1" || kv.Value.AsString() == "k" {
					t.Errorf("%s: a per-key attribute leaked: %v", m.Name, kv)
				}
			}
		}
	}
	sum := func(name string, match ...attribute.KeyValue) int64 {
		t.Helper()
		m, ok := got[name]
		if !ok {
			t.Fatalf("no metric %s; have %v", name, keys(got))
		}
		s, ok := m.Data.(metricdata.Sum[int64])
		if !ok {
			t.Fatalf("%s: %T, want a Sum[int64]", name, m.Data)
		}
		if !s.IsMonotonic {
			t.Errorf("%s is not monotonic", name)
		}
		var n int64
		for _, dp := range s.DataPoints {
			if hasAll(dp.Attributes, match) {
				n += dp.Value
			}
		}
		return n
	}
	checks := []struct {
		name  string
		match []attribute.KeyValue
		want  int64
	}{
		{"concurkit.cas.conflicts", []attribute.KeyValue{otelobserve.PackageKey.String("optimisticpg")}, 3},
		{"concurkit.retries", []attribute.KeyValue{otelobserve.GaveUpKey.Bool(false), otelobserve.ErrorTypeKey.String("_OTHER")}, 1},
		{"concurkit.retries", []attribute.KeyValue{otelobserve.GaveUpKey.Bool(true), otelobserve.ErrorTypeKey.String("canceled")}, 1},
		{"concurkit.lease.extensions", []attribute.KeyValue{otelobserve.OutcomeKey.String("ok")}, 1},
		{"concurkit.lease.extensions", []attribute.KeyValue{otelobserve.OutcomeKey.String("failed")}, 1},
		{"concurkit.lease.losses", nil, 1},
		{"concurkit.fence.rejections", []attribute.KeyValue{otelobserve.PackageKey.String("fencedpg")}, 1},
	}
	for _, c := range checks {
		if n := sum(c.name, c.match...); n != c.want {
			t.Errorf("%s%v = %d, want %d", c.name, c.match, n, c.want)
		}
	}
	units := map[string]string{
		"concurkit.cas.conflicts": "{conflict}", "concurkit.retries": "{retry}",
		"concurkit.lock.wait.duration": "s", "concurkit.lease.losses": "{lease}",
	}
	for name, unit := range units {
		if got[name].Unit != unit {
			t.Errorf("%s unit %q, want %q", name, got[name].Unit, unit)
		}
	}
	hist, ok := got["concurkit.lock.wait.duration"].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("lock wait: %T", got["concurkit.lock.wait.duration"].Data)
	}
	var count uint64
	var total float64
	for _, dp := range hist.DataPoints {
		count += dp.Count
		total += dp.Sum
	}
	if count != 2 || total < 2.0 || total > 2.03 {
		t.Errorf("lock wait histogram: count %d sum %v, want 2 and 2.02 s", count, total)
	}
}

func attrsOf(m metricdata.Metrics) []attribute.KeyValue {
	var out []attribute.KeyValue
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes.ToSlice()...)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes.ToSlice()...)
		}
	}
	return out
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func keys(m map[string]metricdata.Metrics) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

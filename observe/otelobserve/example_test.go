package otelobserve_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/observe/otelobserve"
)

func ExampleNew() {
	reader := sdkmetric.NewManualReader() // in a service: your exporter's reader
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	hooks, err := otelobserve.New(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := observe.WithHooks(context.Background(), hooks)
	observe.FromContext(ctx).OnConflict(ctx, observe.ConflictEvent{Package: "optimisticpg", Table: "accounts"})

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	m := rm.ScopeMetrics[0].Metrics[0]
	fmt.Println(m.Name, m.Unit, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
	// Output: concurkit.cas.conflicts {conflict} 1
}

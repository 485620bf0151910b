package e2etest

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/concurkit/concurkit/outbox"
)

// IsChild reports whether this process is a run's child (a relay or a
// consumer): call it first in the test binary's TestMain, and Child if so.
func IsChild() bool { return os.Getenv(envRole) != "" }

// Child runs the role the parent gave this process and never returns: it
// runs until it is killed, or exits 1 on an error. It prints READY once
// it runs; with a stop point, PUBLISHED (a relay, after its Nth publish
// returned and before the relay marks the batch) or COMMITTED (a
// consumer, after its Nth inbox transaction committed and before the
// ack), and then waits to be killed.
func Child(b Broker) {
	ctx := context.Background()
	d, err := openDB(ctx, os.Getenv(envDB), os.Getenv(envDSN))
	if err != nil {
		fail(err)
	}
	addr := os.Getenv(envAddr)
	stopAfter, _ := strconv.Atoi(os.Getenv(envStop))
	switch role := os.Getenv(envRole); role {
	case "relay":
		pub, dups, _, err := b.Publisher(ctx, addr)
		if err != nil {
			fail(err)
		}
		var batches int
		var last int64
		hooked := outbox.PublisherFunc(func(ctx context.Context, msgs []outbox.Message) error {
			if err := pub.Publish(ctx, msgs); err != nil {
				return err
			}
			if dups != nil {
				n := dups()
				_ = d.count(ctx, "broker_duplicates", n-last)
				last = n
			}
			if batches++; batches == stopAfter {
				fmt.Println("PUBLISHED", len(msgs))
				select {} // killed here: published, not marked
			}
			return nil
		})
		relay, err := outbox.NewRelay(d.store, hooked, relayConfig)
		if err != nil {
			fail(err)
		}
		fmt.Println("READY")
		fail(relay.Run(ctx))
	case "consumer":
		var handled int
		fmt.Println("READY")
		fail(b.Consume(ctx, addr, func(ctx context.Context, id string, body []byte) error {
			processed, err := d.apply(ctx, id, string(body))
			if err != nil {
				return err
			}
			if !processed {
				_ = d.count(ctx, "inbox_duplicates", 1)
			}
			if handled++; handled == stopAfter {
				fmt.Println("COMMITTED")
				select {} // killed here: committed, not acknowledged
			}
			return nil
		}))
	default:
		fail(fmt.Errorf("unknown role %q", role))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "e2e child:", err)
	os.Exit(1)
}

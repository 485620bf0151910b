package ratelimit_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/ratelimit"
	"github.com/concurkit/concurkit/ratelimit/ratelimitredis"
)

// Two requests per minute per API key, counted in Redis across every
// instance of the service: the third request gets 429 with Retry-After,
// the RateLimit fields and a problem+json body.
func ExampleMiddleware() {
	addr := os.Getenv("CONCURKIT_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:16379"
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	limiter, err := ratelimitredis.New(rdb, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	apiKey := "key-" + rand.Text() // a fresh key, so the example can run again
	defer limiter.Reset(context.Background(), apiKey)

	limit, err := ratelimit.Middleware(limiter, &ratelimit.Config{
		Limit: ratelimit.Limit{Rate: 2, Period: time.Minute},
		Key:   func(r *http.Request) string { return r.Header.Get("X-API-Key") },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "[]") })
	srv := httptest.NewServer(limit(mux))
	defer srv.Close()

	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/orders", nil)
		req.Header.Set("X-API-Key", apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		line := fmt.Sprint(resp.StatusCode, " RateLimit: ", resp.Header.Get("RateLimit"))
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			line += " Retry-After: " + ra
		}
		fmt.Println(line)
	}
	// Output:
	// 200 RateLimit: "default";r=1;t=30
	// 200 RateLimit: "default";r=0;t=60
	// 429 RateLimit: "default";r=0;t=30 Retry-After: 30
}

// A handler that does not use the middleware (a request costing several
// units, say) can still answer with the draft's fields.
func ExampleWriteHeaders() {
	d := ratelimit.Decision{
		Allowed:    true,
		Limit:      ratelimit.Limit{Rate: 100, Period: time.Minute},
		Remaining:  42,
		ResetAfter: 17 * time.Second,
	}
	h := http.Header{}
	ratelimit.WriteHeaders(h, "per-tenant", d)
	fmt.Println("RateLimit-Policy:", h.Get("RateLimit-Policy"))
	fmt.Println("RateLimit:", h.Get("RateLimit"))
	// Output:
	// RateLimit-Policy: "per-tenant";q=100;w=60
	// RateLimit: "per-tenant";r=42;t=17
}

// Check a configured limit at start-up rather than on the first request.
func ExampleLimit_Validate() {
	fmt.Println(ratelimit.Limit{Rate: 100, Period: time.Minute, Burst: 10}.Validate(ratelimit.GCRA))
	fmt.Println(ratelimit.Limit{Rate: 100, Period: time.Minute, Burst: 10}.Validate(ratelimit.FixedWindow))
	// Output:
	// <nil>
	// concurkit: invalid argument: ratelimit: limit 100 per 1m0s (burst 10): a fixed window has no Burst (set 0 or Rate)
}

func ExampleClientIP() {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:443"
	fmt.Println(ratelimit.ClientIP(r))
	// Output: 2001:db8:1:2::/64
}

// Errors name a key by KeyID, never by the key itself (often an API key):
// compute it to find a known key's errors in the logs.
func ExampleKeyID() {
	fmt.Println(ratelimit.KeyID("sk_live_4eC39HqLyjWDarjtT1zdp7dc"))
	// Output: key#78a08441f431
}

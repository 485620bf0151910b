package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/concurkit/concurkit/internal/loopback"
	"github.com/rs/zerolog"
)

// The nemeses: the faults a run injects, one at a time.
const (
	// NemesisPause SIGSTOPs a client process for 1–3× the TTL, then
	// SIGCONTs it: the GC pause that outlives a lease. Three times in four
	// it picks a lease holder, one between its fenced read and its write
	// when there is one.
	NemesisPause = "pause"
	// NemesisKill SIGKILLs a client process and starts a new one.
	NemesisKill = "kill"
	// NemesisLatency adds 50–250 ms each way on one server's proxy for
	// 1–3× the TTL.
	NemesisLatency = "latency"
	// NemesisReset resets every connection through one server's proxy
	// (TCP RST) for 100 ms.
	NemesisReset = "reset"
	// NemesisDrop lets requests reach one server but drops its answers,
	// closing each connection 300 ms after its first lost answer, for
	// 0.5–1× the TTL: the applied request the client hears nothing of,
	// which drivers and SDKs retry.
	NemesisDrop = "drop"
	// NemesisFreeze stops all traffic to and from one server, connections
	// left open, for 1–3× the TTL (a frozen server or a partition, as a
	// client sees it); healing closes the stalled connections.
	NemesisFreeze = "freeze"
	// NemesisTerminate ends the run's sessions on one database server
	// (PostgreSQL's pg_terminate_backend, MySQL's KILL), as an operator
	// or a failover would.
	NemesisTerminate = "terminate"
	// NemesisServerPause SIGSTOPs one of Config.Servers for 1–3× the TTL.
	NemesisServerPause = "server-pause"
	// NemesisServerKill SIGKILLs one of Config.Servers, leaves it down for
	// 0.5–1× the TTL, and restarts it.
	NemesisServerKill = "server-kill"
	// NemesisFailover fails over one of Config.Failovers: its replicas
	// miss the primary's writes for 0.5–1× the TTL, the primary is killed,
	// a replica promoted, and the clients sent there.
	NemesisFailover = "failover"
	// NemesisPartition cuts one server of a cluster off from the others
	// for 1–3× the TTL (Config.Partitioner); clients still reach every
	// server.
	NemesisPartition = "partition"
)

// Nemeses lists every nemesis, in the order summaries print them. A run
// with Config.Nemeses nil uses those that apply: the server faults only
// with Config.Servers, NemesisFailover only with Config.Failovers,
// NemesisPartition only with Config.Partitioner,
// NemesisTerminate only with a SQL database.
var Nemeses = []string{NemesisPause, NemesisKill, NemesisLatency, NemesisReset, NemesisDrop, NemesisFreeze,
	NemesisTerminate, NemesisServerPause, NemesisServerKill, NemesisFailover, NemesisPartition}

// Fault is one scheduled fault. The plan (kinds, durations and the random
// numbers that choose targets) follows from the seed alone; when each fault
// starts depends on how long the previous ones of its stream took to heal.
// Client faults (pause, kill) and the others come in two streams that run
// at once, each one fault at a time.
type Fault struct {
	// Kind is one of Nemeses.
	Kind string `json:"kind"`
	// Gap is the quiet time before the fault.
	Gap time.Duration `json:"gap"`
	// For is how long the fault lasts.
	For time.Duration `json:"for"`
	// Pick chooses the target among the candidates at injection time.
	Pick uint64 `json:"pick"`
	// Latency is NemesisLatency's added delay.
	Latency time.Duration `json:"latency,omitempty"`

	// Filled in when the fault is injected.
	Target string `json:"target,omitempty"`
	At     int64  `json:"at,omitempty"`    // Unix ns
	Error  string `json:"error,omitempty"` // why it could not be injected
}

// A run injects two streams of faults at once, each one fault at a time:
// the clients' (pauses and kills: a GC pause does not wait for the network
// to be healthy) and the system's (proxies, sessions, servers, failovers).
const (
	clientStream uint64 = 0x636c69656e74
	systemStream uint64 = 0x6e656d65736973
)

// isClientFault reports whether kind belongs to the clients' stream.
func isClientFault(kind string) bool { return kind == NemesisPause || kind == NemesisKill }

// plan returns one stream of faults: kinds drawn from kinds (pauses twice
// as often as each other kind, since the lease workloads need them most),
// gaps of 0.5–1.5× interval, enough to fill d.
func plan(seed, stream uint64, d, ttl, interval time.Duration, kinds []string) []Fault {
	if len(kinds) == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, stream))
	var weighted []string
	for _, k := range kinds {
		weighted = append(weighted, k)
		if k == NemesisPause {
			weighted = append(weighted, k)
		}
	}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	var out []Fault
	for total := time.Duration(0); total < d; {
		f := Fault{Kind: weighted[r.IntN(len(weighted))], Gap: between(interval/2, interval*3/2), Pick: r.Uint64()}
		switch f.Kind {
		case NemesisPause, NemesisLatency, NemesisFreeze, NemesisServerPause, NemesisPartition:
			f.For = between(ttl, 3*ttl)
		case NemesisReset:
			f.For = 100 * time.Millisecond
		case NemesisDrop, NemesisServerKill, NemesisFailover:
			f.For = between(ttl/2, ttl)
		}
		if f.Kind == NemesisLatency {
			f.Latency = between(50*time.Millisecond, 250*time.Millisecond)
		}
		out = append(out, f)
		total += f.Gap + f.For
	}
	return out
}

// proxies are the run's Toxiproxy proxies, one per server, in process.
type proxies struct {
	api   *toxiproxy.ApiServer
	names []string
	by    map[string]*toxiproxy.Proxy
}

// startProxies puts a proxy on 127.0.0.1 in front of each server and
// returns the endpoints rewritten to go through them.
func startProxies(e Endpoints, systems []string) (*proxies, Endpoints, error) {
	servers, err := e.servers(systems...)
	if err != nil {
		return nil, e, err
	}
	p := &proxies{api: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), by: map[string]*toxiproxy.Proxy{}}
	for _, s := range servers {
		px, err := p.add(s.name, s.addr)
		if err != nil {
			p.close()
			return nil, e, fmt.Errorf("chaos: proxy for %s: %w", s.name, err)
		}
		p.names = append(p.names, s.name)
		p.by[s.name] = px
		s.set(&e, px.Listen)
	}
	return p, e, nil
}

// add starts a proxy named name in front of upstream. It listens below the
// ephemeral port range: a failover restarts the listener on the same port
// (toxiproxy's Update), and an outgoing connection given that port in
// between would make the restart fail and leave the server unreachable.
func (p *proxies) add(name, upstream string) (*toxiproxy.Proxy, error) {
	var err error
	for range 5 {
		var ports []int
		if ports, err = loopback.FreePorts(1); err != nil {
			return nil, err
		}
		px := toxiproxy.NewProxy(p.api, name, loopback.Addr(ports[0]), upstream)
		if err = p.api.Collection.Add(px, true); err == nil {
			return px, nil
		}
		// Another process took the port since it was found free; any
		// other error would repeat.
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
	}
	return nil, err
}

func (p *proxies) close() { _ = p.api.Collection.Clear() }

// toxic adds a toxic to proxy name.
func (p *proxies) toxic(name, json string) error {
	_, err := p.by[name].Toxics.AddToxicJson(strings.NewReader(json))
	return err
}

// heal removes every toxic of proxy name (a removed timeout toxic closes
// the connections it stalled).
func (p *proxies) heal(ctx context.Context, name string) { p.by[name].Toxics.ResetToxics(ctx) }

// inject runs fault f to its end (or ctx's) and heals it; kills are
// recorded in killed. It returns why the fault could not be injected.
func (n *nemesis) inject(ctx context.Context, f *Fault) error {
	r := rand.New(rand.NewPCG(f.Pick, 0))
	f.At = time.Now().UnixNano()
	wait := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	switch f.Kind {
	case NemesisServerPause, NemesisServerKill:
		return n.injectServer(ctx, f, wait)
	case NemesisFailover:
		return n.injectFailover(ctx, f)
	case NemesisPartition:
		return n.injectPartition(ctx, f, wait)
	case NemesisTerminate:
		if len(n.databases) == 0 {
			return fmt.Errorf("no database")
		}
		sys := n.databases[r.IntN(len(n.databases))]
		f.Target = sys
		_, err := terminate(ctx, n.env, sys)
		return err
	case NemesisPause, NemesisKill:
		w := n.crew.pick(r, f.Kind == NemesisPause && r.IntN(4) > 0)
		if w == nil {
			return fmt.Errorf("no client process")
		}
		f.Target = fmt.Sprintf("process %d", w.id)
		if f.Kind == NemesisKill {
			n.killed[w.id] = true
			_ = w.cmd.Process.Kill()
			<-w.done
			return n.crew.start()
		}
		if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		wait(f.For)
		return w.cmd.Process.Signal(syscall.SIGCONT)
	}
	if n.proxies == nil || len(n.proxies.names) == 0 {
		return fmt.Errorf("no proxied server")
	}
	name := n.proxies.names[r.IntN(len(n.proxies.names))]
	f.Target = name
	var toxics []string
	switch f.Kind {
	case NemesisLatency:
		for _, s := range []string{"upstream", "downstream"} {
			toxics = append(toxics, fmt.Sprintf(`{"name":"lat-%s","type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":%d}}`,
				s, s, f.Latency.Milliseconds()/2, f.Latency.Milliseconds()/4))
		}
	case NemesisReset:
		toxics = []string{`{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`}
	case NemesisDrop:
		toxics = []string{`{"name":"drop","type":"timeout","stream":"downstream","attributes":{"timeout":300}}`}
	case NemesisFreeze:
		for _, s := range []string{"upstream", "downstream"} {
			toxics = append(toxics, fmt.Sprintf(`{"name":"freeze-%s","type":"timeout","stream":%q,"attributes":{"timeout":0}}`, s, s))
		}
	default:
		return fmt.Errorf("unknown nemesis %q", f.Kind)
	}
	defer n.proxies.heal(context.WithoutCancel(ctx), name)
	for _, t := range toxics {
		if err := n.proxies.toxic(name, t); err != nil {
			return err
		}
	}
	wait(f.For)
	return nil
}

// nemesis injects a run's plan.
type nemesis struct {
	crew          *crew
	proxies       *proxies
	killed        map[int]bool
	env           *env     // direct endpoints, for NemesisTerminate
	databases     []string // the run's SQL systems
	servers       map[string]Server
	serverNames   []string // sorted, so that the seed picks
	failovers     map[string]Failover
	failoverNames []string // sorted
	partitioner   Partitioner
}

// runAll injects the plans of kinds from seed, the clients' faults and the
// system's concurrently, until ctx ends, and returns the faults started,
// in the order they started. progress is called once per fault, never
// concurrently.
func (n *nemesis) runAll(ctx context.Context, seed uint64, d, ttl, interval time.Duration, kinds []string, progress func(Fault)) []Fault {
	var client, system []string
	for _, k := range kinds {
		if isClientFault(k) {
			client = append(client, k)
		} else {
			system = append(system, k)
		}
	}
	var mu sync.Mutex
	report := func(f Fault) {
		mu.Lock()
		defer mu.Unlock()
		if progress != nil {
			progress(f)
		}
	}
	var wg sync.WaitGroup
	var a, b []Fault
	wg.Go(func() { a = n.run(ctx, plan(seed, clientStream, d, ttl, interval, client), report) })
	wg.Go(func() { b = n.run(ctx, plan(seed, systemStream, d, ttl, interval, system), report) })
	wg.Wait()
	all := append(a, b...)
	slices.SortStableFunc(all, func(x, y Fault) int { return cmpInt64(x.At, y.At) })
	return all
}

// run injects the faults of p in order until ctx ends, and returns those it
// started. A fault whose injection failed because the run ended meanwhile
// (a terminate still connecting, say) is left out: it was neither
// injected nor refused by its target, and counting it as "not injected"
// would fail a run for the moment it stopped.
func (n *nemesis) run(ctx context.Context, p []Fault, progress func(Fault)) []Fault {
	var done []Fault
	for _, f := range p {
		t := time.NewTimer(f.Gap)
		select {
		case <-ctx.Done():
			t.Stop()
			return done
		case <-t.C:
		}
		if err := n.inject(ctx, &f); err != nil {
			if ctx.Err() != nil {
				return done
			}
			f.Error = err.Error()
		}
		done = append(done, f)
		if progress != nil {
			progress(f)
		}
	}
	return done
}

package concurkit_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Dependencies follow use (see the package doc): a user of one driver never
// compiles another. TestDependencies reads `go list -deps` for every package
// of the module and checks the rules below; it fails on the import that
// breaks one and names the package.

const module = "github.com/concurkit/concurkit"

// Third-party families, by import-path prefix.
var (
	pgxFamily   = []string{"github.com/jackc/"}
	mysqlFamily = []string{"github.com/go-sql-driver/", "filippo.io/edwards25519"}
	aws         = []string{"github.com/aws/"}
	redis       = []string{"github.com/redis/"}
	etcd        = []string{"go.etcd.io/", "google.golang.org/grpc"}
	zookeeper   = []string{"github.com/go-zookeeper/"}
	otel        = []string{"go.opentelemetry.io/"}
	nats        = []string{"github.com/nats-io/"}
	amqp091     = []string{"github.com/rabbitmq/"}
	testOnly    = []string{"testing", "github.com/testcontainers/", "go.uber.org/goleak"}
	peers       = []string{"github.com/go-redsync/", "github.com/bsm/redislock", "go.etcd.io/etcd/client/v3/concurrency", "go.etcd.io/etcd/server/", "github.com/go-redis/redis_rate"}
	allDrivers  = slices.Concat(pgxFamily, mysqlFamily, aws, redis, etcd, zookeeper, otel, nats, amqp091)
)

// stdlibOnly are the driver-neutral cores: they may import only the standard
// library and other packages of this module that are stdlib-only themselves.
var stdlibOnly = []string{
	"", "observe", "retry", "optimistic", "upsert", "pessimistic", "fenced", "distlock", "deadlock",
	"internal/sqlerr", "internal/handle", "distlock/internal/lease", "internal/ident", "internal/redact",
	"optimistic/internal/cas", "upsert/internal/spec", "fenced/internal/guard", "pessimistic/internal/txn",
	"distlock/internal/sentinel", "internal/problem",
	"ratelimit", "ratelimit/internal/spec",
	"idempotency", "idempotency/internal/wire",
	"inbox", "inbox/internal/spec", "outbox", "outbox/internal/spec",
	"saga", "hotrow", "durability", "durability/internal/rules", "internal/roundrobin",
	"distlock/election", "distlock/semaphore", "distlock/multilock", "distlock/rwlock",
}

// allowedDrivers says which third-party families an adapter may compile,
// by the adapter's name suffix; every other family is forbidden.
var allowedDrivers = []struct {
	suffix string
	allow  [][]string
}{
	{"pg", [][]string{pgxFamily}},
	{"mysql", [][]string{mysqlFamily}},
	{"dynamo", [][]string{aws}},
	{"redis", [][]string{redis}}, // ratelimitredis: go-redis only
	{"redislock", [][]string{redis}},
	{"redlock", [][]string{redis}},
	{"etcdlock", [][]string{etcd}},
	{"zklock", [][]string{zookeeper}},
	{"dynamolock", [][]string{aws}},
	{"pglock", [][]string{pgxFamily}},
	{"otelobserve", [][]string{otel}},
	{"nats", [][]string{nats}}, // outboxnats, inboxnats: the NATS client only
	{"amqp", [][]string{amqp091}},
}

// isLibrary reports whether pkg is imported by users' production code
// (everything but tests kits, tools and commands).
func isLibrary(pkg string) bool {
	return pkg != "testkit" && !strings.HasSuffix(pkg, "test") &&
		!strings.HasPrefix(pkg, "bench") && !strings.HasPrefix(pkg, "cmd/")
}

func hasPrefix(p string, family []string) bool {
	return slices.ContainsFunc(family, func(f string) bool { return p == f || strings.HasPrefix(p, f) })
}

func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{} // module-relative package -> all deps
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		deps[rel] = f[1:]
	}
	for _, core := range stdlibOnly {
		if _, ok := deps[core]; !ok {
			t.Errorf("core package %q not found", core)
		}
	}
	checked := 0
	for pkg, ds := range deps {
		var nonStd []string
		for _, d := range ds {
			if strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
				nonStd = append(nonStd, d)
			}
		}
		if slices.Contains(stdlibOnly, pkg) {
			checked++
			for _, d := range nonStd {
				rel, own := strings.CutPrefix(d, module+"/")
				if d == module {
					rel, own = "", true
				}
				if !own || !slices.Contains(stdlibOnly, rel) {
					t.Errorf("%s depends on %s: a core package imports only the standard library and concurkit's stdlib-only packages", show(pkg), d)
				}
			}
		}
		if isLibrary(pkg) {
			for _, d := range ds {
				if hasPrefix(d, testOnly) || hasPrefix(d, peers) {
					t.Errorf("%s depends on %s: library packages never import testing helpers, servers or peer lock libraries", show(pkg), d)
				}
				// A lock backend takes a fenced.Source; it never picks the
				// token store's driver for the user. (An election board
				// adapter is storage: electionpg writes through fencedpg.)
				if strings.HasPrefix(pkg, "distlock/") && !strings.HasPrefix(pkg, "distlock/election/") &&
					strings.HasPrefix(d, module+"/fenced/fenced") {
					t.Errorf("%s depends on %s: a lock backend never imports a fenced adapter", show(pkg), d)
				}
			}
		}
		base := pkg[strings.LastIndex(pkg, "/")+1:]
		for _, rule := range allowedDrivers {
			if !strings.HasSuffix(base, rule.suffix) || !isLibrary(pkg) || strings.HasPrefix(pkg, "internal/") {
				continue
			}
			checked++
			allowed := slices.Concat(rule.allow...)
			for _, d := range nonStd {
				if hasPrefix(d, allDrivers) && !hasPrefix(d, allowed) {
					t.Errorf("%s depends on %s: an adapter compiles only its own driver", show(pkg), d)
				}
			}
			t.Logf("%-40s %3d non-standard packages", show(pkg), len(nonStd))
			break
		}
	}
	if checked < len(stdlibOnly)+24 { // 15 concept adapters, 4 broker adapters, 6 lock backends, otelobserve
		t.Errorf("checked %d packages: the rules no longer match the layout", checked)
	}
}

func show(pkg string) string {
	if pkg == "" {
		return "concurkit"
	}
	return pkg
}

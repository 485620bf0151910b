package chaos

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Endpoints are the servers a run uses. EndpointsFromEnv fills them from
// the same environment variables as the project's tests
// (scripts/services.sh env prints them).
type Endpoints struct {
	// Postgres is a PostgreSQL URL (CONCURKIT_POSTGRES_URL).
	Postgres string `json:"postgres,omitempty"`
	// MySQL is a MariaDB/MySQL DSN in go-sql-driver form, naming no
	// database or the one to use (CONCURKIT_MYSQL_DSN).
	MySQL string `json:"mysql,omitempty"`
	// Redis is a single Redis server's host:port (CONCURKIT_REDIS_ADDR).
	Redis string `json:"redis,omitempty"`
	// Redlock are independent Redis masters (CONCURKIT_REDLOCK_ADDRS).
	Redlock []string `json:"redlock,omitempty"`
	// ZooKeeper are ZooKeeper servers' host:port (CONCURKIT_ZK_ADDR).
	ZooKeeper []string `json:"zookeeper,omitempty"`
	// Etcd are etcd client URLs (CONCURKIT_ETCD_ENDPOINT).
	Etcd []string `json:"etcd,omitempty"`
	// DynamoDB is a DynamoDB endpoint URL (CONCURKIT_DYNAMODB_ENDPOINT).
	DynamoDB string `json:"dynamodb,omitempty"`
	// NATS is a NATS server URL with JetStream enabled
	// (CONCURKIT_NATS_URL).
	NATS string `json:"nats,omitempty"`
	// AMQP is a RabbitMQ (AMQP 0-9-1) URL, credentials and virtual host
	// included (CONCURKIT_AMQP_URL).
	AMQP string `json:"amqp,omitempty"`
}

// The servers scripts/services.sh starts, used where the environment names
// none.
const (
	defaultPostgres = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	defaultMySQL    = "root@tcp(127.0.0.1:13306)/"
	defaultRedis    = "127.0.0.1:16379"
	defaultRedlock  = "127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382,127.0.0.1:16383,127.0.0.1:16384"
	defaultZK       = "127.0.0.1:12181"
	defaultEtcd     = "http://127.0.0.1:12379"
	defaultDynamoDB = "http://127.0.0.1:18000"
	defaultNATS     = "nats://127.0.0.1:14222"
	defaultAMQP     = "amqp://guest:guest@127.0.0.1:15680/"
)

// EndpointsFromEnv returns the endpoints named by the CONCURKIT_*
// environment variables, each defaulting to the server scripts/services.sh
// starts.
func EndpointsFromEnv() Endpoints {
	get := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	list := func(s string) []string { return strings.Split(s, ",") }
	return Endpoints{
		Postgres:  get("CONCURKIT_POSTGRES_URL", defaultPostgres),
		MySQL:     get("CONCURKIT_MYSQL_DSN", defaultMySQL),
		Redis:     get("CONCURKIT_REDIS_ADDR", defaultRedis),
		Redlock:   list(get("CONCURKIT_REDLOCK_ADDRS", defaultRedlock)),
		ZooKeeper: list(get("CONCURKIT_ZK_ADDR", defaultZK)),
		Etcd:      list(get("CONCURKIT_ETCD_ENDPOINT", defaultEtcd)),
		DynamoDB:  get("CONCURKIT_DYNAMODB_ENDPOINT", defaultDynamoDB),
		NATS:      get("CONCURKIT_NATS_URL", defaultNATS),
		AMQP:      get("CONCURKIT_AMQP_URL", defaultAMQP),
	}
}

// server is one server endpoint a run may put a proxy in front of.
type server struct {
	name string // "postgres", "redlock-2", …
	addr string // host:port
	set  func(e *Endpoints, addr string)
}

// servers lists the servers of e that the named systems use ("postgres",
// "mysql", "redis", "redlock", "zookeeper", "etcd", "dynamodb", "nats",
// "amqp"), each with a setter that points a copy of e at another
// host:port (a proxy).
func (e Endpoints) servers(systems ...string) ([]server, error) {
	var out []server
	for _, sys := range systems {
		switch sys {
		case "postgres":
			addr, err := urlHost(e.Postgres)
			if err != nil {
				return nil, err
			}
			out = append(out, server{"postgres", addr, func(e *Endpoints, a string) { e.Postgres = replaceURLHost(e.Postgres, a) }})
		case "mysql":
			cfg, err := mysql.ParseDSN(e.MySQL)
			if err != nil {
				return nil, fmt.Errorf("chaos: mysql dsn: %w", err)
			}
			out = append(out, server{"mysql", cfg.Addr, func(e *Endpoints, a string) {
				c, _ := mysql.ParseDSN(e.MySQL)
				c.Addr = a
				e.MySQL = c.FormatDSN()
			}})
		case "redis":
			out = append(out, server{"redis", e.Redis, func(e *Endpoints, a string) { e.Redis = a }})
		case "redlock":
			for i, addr := range e.Redlock {
				out = append(out, server{fmt.Sprintf("redlock-%d", i+1), addr, func(e *Endpoints, a string) {
					e.Redlock = append([]string(nil), e.Redlock...)
					e.Redlock[i] = a
				}})
			}
		case "zookeeper":
			for i, addr := range e.ZooKeeper {
				out = append(out, server{fmt.Sprintf("zookeeper-%d", i+1), addr, func(e *Endpoints, a string) {
					e.ZooKeeper = append([]string(nil), e.ZooKeeper...)
					e.ZooKeeper[i] = a
				}})
			}
		case "etcd":
			for i, u := range e.Etcd {
				addr, err := urlHost(u)
				if err != nil {
					return nil, err
				}
				out = append(out, server{fmt.Sprintf("etcd-%d", i+1), addr, func(e *Endpoints, a string) {
					e.Etcd = append([]string(nil), e.Etcd...)
					e.Etcd[i] = replaceURLHost(e.Etcd[i], a)
				}})
			}
		case "dynamodb":
			addr, err := urlHost(e.DynamoDB)
			if err != nil {
				return nil, err
			}
			out = append(out, server{"dynamodb", addr, func(e *Endpoints, a string) { e.DynamoDB = replaceURLHost(e.DynamoDB, a) }})
		case "nats":
			addr, err := urlHost(e.NATS)
			if err != nil {
				return nil, err
			}
			out = append(out, server{"nats", addr, func(e *Endpoints, a string) { e.NATS = replaceURLHost(e.NATS, a) }})
		case "amqp":
			addr, err := urlHost(e.AMQP)
			if err != nil {
				return nil, err
			}
			out = append(out, server{"amqp", addr, func(e *Endpoints, a string) { e.AMQP = replaceURLHost(e.AMQP, a) }})
		default:
			return nil, fmt.Errorf("chaos: unknown system %q", sys)
		}
	}
	for _, s := range out {
		if _, _, err := net.SplitHostPort(s.addr); err != nil {
			return nil, fmt.Errorf("chaos: %s address %q: %w", s.name, s.addr, err)
		}
	}
	return out, nil
}

func urlHost(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("chaos: endpoint %q: %w", s, err)
	}
	if u.Port() == "" {
		return "", fmt.Errorf("chaos: endpoint %q names no port", s)
	}
	return u.Host, nil
}

func replaceURLHost(s, addr string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	u.Host = addr
	return u.String()
}

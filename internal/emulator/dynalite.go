package emulator

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DynamoDB is a dynalite emulator running for one test.
type DynamoDB struct {
	// Endpoint is the emulator's base URL, http://127.0.0.1:<port>.
	Endpoint string
	// Region is the region clients use (dynalite accepts any).
	Region string

	proc       *nodeProcess
	httpClient *http.Client
}

// dynalitePort is the port dynalite is told to use; the loopback preload
// replaces it by an ephemeral one (dynalite itself turns port 0 into 4567).
const dynalitePort = 4567

// Dynalite starts an in-memory dynalite emulator for t on an ephemeral
// 127.0.0.1 port and returns once it has answered a ListTables call. It
// installs the npm packages first if needed. The emulator is killed when t
// ends. It fails t (with the emulator's output) if the emulator does not come
// up within the start timeout, and skips t only if
// BENTHOS_KINESIS_SKIP_EMULATORS is set.
func Dynalite(t testing.TB, opts ...Option) *DynamoDB {
	t.Helper()
	cfg := newLaunchConfig(opts)
	proc, port := startNode(t, nodeLaunch{
		pkg:       dynalitePackage,
		script:    "cli.js",
		args:      []string{"--host", "127.0.0.1", "--port", strconv.Itoa(dynalitePort)},
		portLabel: dynalitePort,
	}, cfg)
	d := &DynamoDB{
		Endpoint:   fmt.Sprintf("http://127.0.0.1:%d", port),
		Region:     cfg.region,
		proc:       proc,
		httpClient: newHTTPClient(),
	}
	// Runs before the process is killed (cleanups run last-in first-out).
	t.Cleanup(d.httpClient.CloseIdleConnections)

	probe := d.Client(func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	proc.waitReady(t, func(ctx context.Context) error {
		_, err := probe.ListTables(ctx, &dynamodb.ListTablesInput{})
		return err
	})
	return d
}

// Client returns a DynamoDB client for the emulator: its endpoint and
// region, the fake [Credentials], and an HTTP client whose idle connections
// are closed when the test ends. optFns adjust it.
func (d *DynamoDB) Client(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       d.Region,
		BaseEndpoint: aws.String(d.Endpoint),
		Credentials:  Credentials(),
		HTTPClient:   d.httpClient,
	}, optFns...)
}

// PID is the emulator's process id (also its process group id).
func (d *DynamoDB) PID() int { return d.proc.pid() }

// Stop kills the emulator now, e.g. to test an outage, and waits until it is
// gone. The test's cleanup calls it too; later calls return the first result.
func (d *DynamoDB) Stop() error {
	d.httpClient.CloseIdleConnections()
	return d.proc.stop()
}

package emulator

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Kinesis is a kinesis-local (kinesis-mock) emulator running for one test.
// Its SubscribeToShard needs [EFOProxy] in front of it for aws-sdk-go-v2.
type Kinesis struct {
	// Endpoint is the emulator's base URL, http://127.0.0.1:<port>.
	Endpoint string
	// Region is the region the emulator serves and puts in ARNs.
	Region string
	// AccountID is the account id the emulator puts in ARNs.
	AccountID string

	proc       *nodeProcess
	httpClient *http.Client
}

// kinesisPlainPort and kinesisTLSPort are the ports kinesis-local is told
// to use; the loopback preload replaces them by ephemeral ones.
const (
	kinesisPlainPort = 4568
	kinesisTLSPort   = 4567
)

// KinesisLocal starts a kinesis-local emulator for t on an ephemeral
// 127.0.0.1 port and returns once it has answered a ListStreams call. It
// installs the npm packages first if needed. The emulator is killed when t
// ends. It fails t (with the emulator's output) if the emulator does not come
// up within the start timeout, and skips t only if
// BENTHOS_KINESIS_SKIP_EMULATORS is set.
func KinesisLocal(t testing.TB, opts ...Option) *Kinesis {
	t.Helper()
	cfg := newLaunchConfig(opts)
	proc, port := startNode(t, nodeLaunch{
		pkg:    kinesisLocalPackage,
		script: "main.js",
		env: []string{
			"LOG_LEVEL=WARN",
			"AWS_REGION=" + cfg.region,
			// The preload forces loopback; these keep the two listeners apart.
			"KINESIS_MOCK_PLAIN_PORT=" + strconv.Itoa(kinesisPlainPort),
			"KINESIS_MOCK_TLS_PORT=" + strconv.Itoa(kinesisTLSPort),
		},
		portLabel: kinesisPlainPort,
		codeCache: true,
	}, withoutPortEnv(cfg))
	k := &Kinesis{
		Endpoint:   fmt.Sprintf("http://127.0.0.1:%d", port),
		Region:     cfg.region,
		AccountID:  "000000000000",
		proc:       proc,
		httpClient: newHTTPClient(),
	}
	if id := cfg.env["AWS_ACCOUNT_ID"]; id != "" {
		k.AccountID = id
	}
	// Runs before the process is killed (cleanups run last-in first-out).
	t.Cleanup(k.httpClient.CloseIdleConnections)

	probe := k.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	proc.waitReady(t, func(ctx context.Context) error {
		_, err := probe.ListStreams(ctx, &kinesis.ListStreamsInput{})
		return err
	})
	return k
}

// Client returns a kinesis client for the emulator: its endpoint and region,
// the fake [Credentials], and an HTTP client whose idle connections are
// closed when the test ends. optFns adjust it, e.g. to point BaseEndpoint at
// an [EFOProxy].
func (k *Kinesis) Client(optFns ...func(*kinesis.Options)) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       k.Region,
		BaseEndpoint: aws.String(k.Endpoint),
		Credentials:  Credentials(),
		HTTPClient:   k.httpClient,
	}, optFns...)
}

// StreamARN is the ARN the emulator gives the stream named name.
func (k *Kinesis) StreamARN(name string) string {
	return fmt.Sprintf("arn:aws:kinesis:%s:%s:stream/%s", k.Region, k.AccountID, name)
}

// PID is the emulator's process id (also its process group id).
func (k *Kinesis) PID() int { return k.proc.pid() }

// Stop kills the emulator now, e.g. to test an outage, and waits until it is
// gone. The test's cleanup calls it too; later calls return the first result.
func (k *Kinesis) Stop() error {
	k.httpClient.CloseIdleConnections()
	return k.proc.stop()
}

// withoutPortEnv drops port settings a caller passed through WithEnv: the
// launcher owns them (the preload identifies listeners by these numbers).
func withoutPortEnv(cfg *launchConfig) *launchConfig {
	delete(cfg.env, "KINESIS_MOCK_PLAIN_PORT")
	delete(cfg.env, "KINESIS_MOCK_TLS_PORT")
	return cfg
}

// newHTTPClient returns a client with its own connection pool, so that
// closing one emulator's idle connections leaves other tests alone.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // loopback only; never through a proxy from the environment
	return &http.Client{Transport: tr}
}

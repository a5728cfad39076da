package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// The tests of this file run the binary against an endpoint that takes
// connections and never answers (emulator.Blackhole), with the production
// deadlines (20 s a call; the lease table's calls within lease_period): each
// must be reported within 30 s, naming the endpoint. They run in parallel,
// so together they take about 20 s.

// reportWithin is the promise: a silent endpoint is reported within it.
const reportWithin = 30 * time.Second

// TestSilentKinesisEndpointIsReportedByRun: a Kinesis endpoint that never
// answers is logged as an error at the default log level within 30 s,
// naming the endpoint, and the binary keeps retrying. Before, the first
// DescribeStreamSummary waited for ever on Connect's context: nothing was
// logged for minutes, even at debug. The endpoint's password is in no line
// of the log.
func TestSilentKinesisEndpointIsReportedByRun(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	silent := emulator.Blackhole(t)
	withPassword := strings.Replace(silent, "http://", "http://user:hunter2@", 1)
	config := writeConfig(t, dir, fmt.Sprintf(`
http: { enabled: false }
input:
  aws_kinesis_streams:
    streams: [ orders ]
    endpoint: %s
    region: us-east-1
    credentials: { id: fake, secret: fake }
    reader: polling
    checkpoint: { dir: %s }
output:
  drop: {}
`, withPassword, filepath.Join(dir, "cp")))
	logPath := filepath.Join(dir, "run.log")
	reportedWhileRetrying(t, bin, config, logPath, silent, "DescribeStreamSummary")
	if log, _ := os.ReadFile(logPath); strings.Contains(string(log), "hunter2") {
		t.Errorf("the log shows the endpoint's password:\n%s", log)
	}
}

// TestSilentDynamoDBEndpointIsReportedByRun: a lease table whose DynamoDB
// endpoint never answers is logged as an error at the default log level
// within 30 s (the check at start gives up after 5 s, the opening of the
// table after lease_period), naming the endpoint. Before, opening the table
// waited for ever on Connect's context, saying nothing.
func TestSilentDynamoDBEndpointIsReportedByRun(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 1))
	silent := emulator.Blackhole(t)
	config := writeConfig(t, dir, fmt.Sprintf(`
http: { enabled: false }
%s    reader: polling
    checkpoint: { dynamodb: { table: leases, endpoint: %s } }
output:
  drop: {}
`, fakeInputHead(srv, ca), silent))
	reportedWhileRetrying(t, bin, config, filepath.Join(dir, "run.log"), silent, "DescribeTable")
}

// reportedWhileRetrying runs the binary with config, logging to logPath,
// until it logs that the endpoint silent gave no answer: an error naming
// call, while the binary runs on (it retries).
func reportedWhileRetrying(t *testing.T, bin, config, logPath, silent, call string) {
	t.Helper()
	start := time.Now()
	cmd := run(t, bin, config, logPath)
	line := waitForLogLine(t, logPath, start, "no answer from "+silent)
	if !strings.Contains(line, "level=error") || !strings.Contains(line, call) {
		t.Errorf("the report is not an error naming the call %s: %s", call, line)
	}
	if cmd.ProcessState != nil {
		t.Fatalf("the binary exited (%v) instead of retrying", cmd.ProcessState)
	}
}

// TestSilentEndpointEndsCommands: `checkpoint show` (from --dir with Kinesis
// silent, from --table with DynamoDB silent) and `efo describe` end within
// 30 s with a non-zero exit and an error naming the endpoint. Before, they
// waited for ever (45 s and 100 s when the cases were first tried).
func TestSilentEndpointEndsCommands(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 1))
	silent := emulator.Blackhole(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"checkpoint show --dir", []string{"checkpoint", "show", "--stream", "orders", "--endpoint", silent, "--dir", filepath.Join(dir, "cp")}},
		{"checkpoint show --table", []string{"checkpoint", "show", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--table", "leases", "--dynamodb-endpoint", silent}},
		{"efo describe", []string{"efo", "describe", "--stream", "orders", "--consumer-name", "app", "--endpoint", silent}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// The guard only keeps a hang from holding the test run.
			ctx, cancel := context.WithTimeout(context.Background(), 2*reportWithin)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, c.args...)
			cmd.Env = fakeAWSEnv()
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			if took > reportWithin {
				t.Errorf("ended after %v, want within %v", took.Round(time.Second), reportWithin)
			}
			if err == nil || ctx.Err() != nil {
				t.Fatalf("exit %v (killed by the guard: %v), want a non-zero exit of its own:\n%s", err, ctx.Err() != nil, out)
			}
			if !strings.Contains(string(out), "no answer from "+silent) {
				t.Errorf("the error does not name the silent endpoint %s:\n%s", silent, out)
			}
		})
	}
}

// writeConfig writes a config file into dir and returns its path.
func writeConfig(t *testing.T, dir, yaml string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitForLogLine waits until the log at path has a line with want, at most
// reportWithin after start, and returns the line.
func waitForLogLine(t *testing.T, path string, start time.Time, want string) string {
	t.Helper()
	for {
		log, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, want) {
				return line
			}
		}
		if time.Since(start) > reportWithin {
			t.Fatalf("no log line with %q within %v; log:\n%s", want, reportWithin, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

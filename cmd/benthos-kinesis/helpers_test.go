package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// startFake starts the fake Kinesis over TLS (HTTP/2, as AWS serves
// fan-out) for t, with opts, and writes its certificate to dir/ca.pem for
// the binary to trust (tls.root_cas_file, --ca-file).
// command returns a runner of the binary with the given leading arguments
// and the fake's credentials: it returns the combined output.
func command(bin string, lead ...string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		cmd := exec.Command(bin, append(slices.Clone(lead), args...)...)
		cmd.Env = fakeAWSEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// binaryAndFake builds the binary and starts the fake Kinesis with opts,
// its CA certificate in a fresh directory dir.
func binaryAndFake(t *testing.T, opts ...kinesisfake.Opt) (bin, dir string, srv *kinesisfake.Server, caFile string) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	srv, caFile = startFake(t, dir, opts...)
	return bin, dir, srv, caFile
}

func startFake(t *testing.T, dir string, opts ...kinesisfake.Opt) (srv *kinesisfake.Server, caFile string) {
	t.Helper()
	srv, err := kinesisfake.New(append([]kinesisfake.Opt{kinesisfake.TLS()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, srv.CertificatePEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

// fakeAWSEnv is the environment of the binary's AWS commands run against
// the fake: any static credentials, a region, no instance metadata.
func fakeAWSEnv() []string {
	return append(os.Environ(), "AWS_ACCESS_KEY_ID=fake", "AWS_SECRET_ACCESS_KEY=fake", "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
}

// pipeline is a run of the binary reading stream orders of a fake from
// trim_horizon, with store the YAML of its checkpoint field's store (e.g.
// `dir: /path`), writing each record to out as a JSON line.
type pipeline struct {
	t   *testing.T
	cmd *exec.Cmd
	out string
	log string
}

// fakeInputHead is the start of a config whose input reads the stream
// orders of the fake srv over TLS (ca: its certificate file); the input's
// other fields follow, indented four spaces.
func fakeInputHead(srv *kinesisfake.Server, ca string) string {
	return inputHead(srv.Endpoint(), srv.Region(), ca)
}

// inputHead is fakeInputHead for the fake at endpoint in region.
func inputHead(endpoint, region, ca string) string {
	return fmt.Sprintf(`input:
  aws_kinesis_streams:
    streams: [ orders ]
    endpoint: %s
    region: %s
    credentials: { id: fake, secret: fake }
    tls: { enabled: true, root_cas_file: %s }
`, endpoint, region, ca)
}

func startPipeline(t *testing.T, bin string, srv *kinesisfake.Server, ca, store, name string) *pipeline {
	t.Helper()
	dir := filepath.Dir(ca)
	p := &pipeline{t: t, out: filepath.Join(dir, name+".jsonl"), log: filepath.Join(dir, name+".log")}
	config := filepath.Join(dir, name+".yaml")
	yaml := fmt.Sprintf(`
http: { enabled: false }
%s    reader: polling
    polling: { interval: 200ms }
    start_from: trim_horizon
    checkpoint: { commit_period: 100ms, %s }
pipeline:
  threads: 1
  processors:
%soutput:
  file: { path: %s, codec: lines }
logger: { level: warn }
`, fakeInputHead(srv, ca), store, recordMapping, p.out)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd = run(t, bin, config, p.log)
	return p
}

// stopAfter waits until the pipeline wrote n records, stops it with
// SIGTERM and returns what it wrote.
func (p *pipeline) stopAfter(n int) []inputtest.Got {
	p.t.Helper()
	waitLinesOrLog(p.t, p, n)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		log, _ := os.ReadFile(p.log)
		p.t.Fatalf("the pipeline did not stop cleanly on SIGTERM: %v; log:\n%s", err, log)
	}
	return readOutput(p.t, p.out)
}

// datas returns the data of each record, in the order written.
func datas(got []inputtest.Got) []string {
	out := make([]string, len(got))
	for i, g := range got {
		out[i] = g.Data
	}
	return out
}

// waitLinesOrLog waits until the pipeline wrote n records, and fails with
// its log otherwise.
func waitLinesOrLog(t *testing.T, p *pipeline, n int) []inputtest.Got {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := readOutput(t, p.out)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(p.log)
			t.Fatalf("%s: %d of %d records within 30 s; log:\n%s", p.out, len(got), n, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recordMapping is the processor of the binary's test pipelines: each record
// as the JSON line readOutput parses (outputLine).
const recordMapping = `    - mapping: |
        root.stream = @kinesis_stream
        root.data = content().string()
        root.shard = @kinesis_shard
        root.seq = @kinesis_sequence_number
        root.sub = @kinesis_sub_sequence_number.or("")
        root.pk = @kinesis_partition_key
        root.out_of_range = @kinesis_hash_key_out_of_range.or(false)
`

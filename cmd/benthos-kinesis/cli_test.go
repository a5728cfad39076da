package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// TestBinaryCommands checks that the binary behaves as any Benthos binary
// with the input in it: list, create, lint, echo (secrets scrubbed), version.
func TestBinaryCommands(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(`
input:
  aws_kinesis_streams:
    streams: [ orders ]
    efo: { consumer_name: app }
    credentials: { id: AKID, secret: topsecret, token: sessiontoken }
output:
  stdout: {}
`), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`
input:
  aws_kinesis_streams:
    streams: [ orders ]
    reader: efo
output:
  stdout: {}
`), 0o644)

	// The lease table's lint rules run in the binary as in the tests (a
	// Bloblang method registered after the input's spec once broke every
	// lint of the binary).
	leases := func(name, checkpoint string) string {
		path := filepath.Join(dir, name+".yaml")
		os.WriteFile(path, []byte(`
input:
  aws_kinesis_streams:
    streams: [ orders ]
    reader: polling
    checkpoint: `+checkpoint+`
output:
  stdout: {}
`), 0o644)
		return path
	}

	for _, c := range []struct {
		args    []string
		wantErr bool
		want    []string
		not     []string
	}{
		{args: []string{"list", "inputs"}, want: []string{"aws_kinesis_streams"}},
		{args: []string{"create", "aws_kinesis_streams"}, want: []string{"aws_kinesis_streams:", "consumer_name", "checkpoint:"}},
		{args: []string{"lint", good}},
		{args: []string{"lint", bad}, wantErr: true, want: []string{"field efo.consumer_name"}},
		{args: []string{"lint", leases("leases", "{ dynamodb: { table: leases, lease_period: 2s } }")}},
		{args: []string{"lint", leases("short", "{ dynamodb: { table: leases, lease_period: 500ms } }")}, wantErr: true, want: []string{"field checkpoint.dynamodb.lease_period: 500ms is too short; expected at least 1s"}},
		{args: []string{"lint", leases("nameless", "{ dynamodb: { table: '' } }")}, wantErr: true, want: []string{"field checkpoint.dynamodb.table: a lease table needs a table name"}},
		{args: []string{"lint", leases("both", "{ dir: /tmp/cp, dynamodb: { table: leases } }")}, wantErr: true, want: []string{"field checkpoint.dir: is set together with checkpoint.dynamodb"}},
		{args: []string{"lint", leases("moved", "{ dir: /tmp/cp }\n    checkpoint_limit: 5\n    dynamodb: { table: t1 }")}, wantErr: true, want: []string{"field checkpoint_limit: is a field of aws_kinesis or a KCL setting; here: checkpoint.limit", "field dynamodb: is a field of aws_kinesis or a KCL setting; here: checkpoint.dynamodb"}},
		// Values of the wrong YAML type, which Benthos's linter passed and
		// run refused; Benthos's own lints of the file are printed too.
		{args: []string{"lint", leases("sure", "{ dir: /tmp/cp }\n    strict_order: sure")}, wantErr: true, want: []string{"sure.yaml(7,19) field strict_order: sure is a string; expected a bool (true or false)"}},
		{args: []string{"lint", leases("many", "{ dir: /tmp/cp }\n    polling: { limit: many }")}, wantErr: true, want: []string{"field polling.limit: many is a string; expected an integer"}},
		{args: []string{"lint", filepath.Join(dir, "*.yaml")}, wantErr: true, want: []string{"field polling.limit: many is a string", "field strict_order: sure"}},
		{args: []string{"lint", leases("quoted", "{ dir: /tmp/cp, limit: '100' }\n    no_such_field: 1")}, wantErr: true, want: []string{"field checkpoint.limit: \"100\" is a quoted string; expected an integer", "field no_such_field not recognised"}},
		{args: []string{"lint", leases("sure2", "{ dir: /tmp/cp }\n    strict_order: sure"), filepath.Join(dir, "missing.yaml")}, wantErr: true, want: []string{"field strict_order", "missing.yaml(1,1) failed to read config"}},
		{args: []string{"lint", leases("variable", "{ dir: /tmp/cp, limit: ${LIMIT:100} }")}},
		{args: []string{"lint", leases("quotedvariable", "{ dir: /tmp/cp, limit: '${LIMIT:100}' }")}, wantErr: true, want: []string{"field checkpoint.limit: \"${LIMIT:100}\" is a quoted string"}},
		{args: []string{"echo", good}, want: []string{"SECRET_SCRUBBED", "AKID"}, not: []string{"topsecret", "sessiontoken"}},
		// Before, echo showed an endpoint's password, and the lint passed
		// a table name DynamoDB refuses.
		{args: []string{"echo", leases("password", "{ dynamodb: { table: leases, endpoint: 'http://user:hunter2@127.0.0.1:8000' } }\n    endpoint: http://user:hunter3@127.0.0.1:4568")}, want: []string{"SECRET_SCRUBBED"}, not: []string{"hunter2", "hunter3"}},
		{args: []string{"lint", leases("badname", "{ dynamodb: { table: 'bad name!' } }")}, wantErr: true, want: []string{"field checkpoint.dynamodb.table: bad name!: expected a DynamoDB table name"}},
		{args: []string{"--version"}, want: []string{"Version:"}},
		{args: []string{"list", "--help"}, want: []string{"List all benthos-kinesis component types"}, not: []string{"List all Benthos with"}},
		{args: []string{"list", "metrics"}, want: []string{"prometheus"}},
		{args: []string{"efo", "--help"}, want: []string{"register", "describe", "list", "deregister"}},
	} {
		out, err := run(c.args...)
		if (err != nil) != c.wantErr {
			t.Errorf("%v: error %v, want error %v\n%s", c.args, err, c.wantErr, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("%v: output shows %q:\n%s", c.args, n, out)
			}
		}
	}
}

// TestUnusableStoreStopsTheBinary: a checkpoint store that can never serve
// stops the binary at start with its message and a non-zero exit, instead
// of being retried for ever: a file in place of checkpoint.dir, a stream
// another process reads from the same directory, a lease table that does
// not exist (create: false) or that the credentials may not use.
func TestUnusableStoreStopsTheBinary(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var odd []string
	file := filepath.Join(dir, "not-a-dir")
	os.WriteFile(file, []byte("x"), 0o644)

	// A pipeline of another process holds stream orders in held/.
	held := filepath.Join(dir, "held")
	store, err := checkpoint.OpenFile(held)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.Load(t.Context(), "arn:aws:kinesis:us-east-1:123456789012:stream/orders"); err != nil {
		t.Fatal(err)
	}
	d := emulator.Dynalite(t)
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"__type":"com.amazon.coral.service#AccessDeniedException","message":"User: arn:aws:iam::123456789012:user/app is not authorized to perform: dynamodb:DescribeTable"}`)
	}))
	t.Cleanup(denied.Close)
	// In the place of the stream's checkpoint file: before, /dev/zero grew
	// the binary by 1.5 GiB in 20 s, a FIFO blocked it silently, a 200 MB
	// file was read whole, and a dangling symlink counted as no checkpoint
	// (every record read again).
	oddFile := func(place func(path string) error) string {
		d := filepath.Join(dir, fmt.Sprintf("odd%d", len(odd)))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := place(filepath.Join(d, "us-east-1.123456789012.orders.json")); err != nil {
			t.Fatal(err)
		}
		odd = append(odd, d)
		return d
	}
	zero := oddFile(func(p string) error { return os.Symlink("/dev/zero", p) })
	fifo := oddFile(func(p string) error { return syscall.Mkfifo(p, 0o644) })
	dangling := oddFile(func(p string) error { return os.Symlink(p+".gone", p) })
	huge := oddFile(func(p string) error {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
		return os.Truncate(p, 200<<20) // sparse: 200 MB to read, none on disk
	})

	for _, c := range []struct {
		name, checkpoint string
		want             []string
	}{
		{"a file as checkpoint.dir", "{ dir: " + file + " }", []string{"field checkpoint.dir", "is a file, not a directory"}},
		{"a stream held by another process", "{ dir: " + held + " }", []string{"field checkpoint.dir", "stream orders is read from checkpoint directory", "by another process"}},
		{"a missing lease table", "{ dynamodb: { table: absent, create: false, endpoint: '" + d.Endpoint + "' } }", []string{"field checkpoint.dynamodb.table", `"absent" does not exist`}},
		{"a lease table access is denied to", "{ dynamodb: { table: leases, endpoint: '" + denied.URL + "' } }", []string{"field checkpoint.dynamodb.table", "access denied; the input needs dynamodb:DescribeTable"}},
		{"a checkpoint file linked to /dev/zero", "{ dir: " + zero + " }", []string{"field checkpoint.dir", `us-east-1.123456789012.orders.json" is a symlink to "/dev/zero", a device, not a regular file`}},
		{"a FIFO as checkpoint file", "{ dir: " + fifo + " }", []string{"field checkpoint.dir", `orders.json" is a FIFO, not a regular file`}},
		{"a dangling symlink as checkpoint file", "{ dir: " + dangling + " }", []string{"field checkpoint.dir", `orders.json.gone", which cannot be followed`}},
		{"a 200 MB checkpoint file", "{ dir: " + huge + " }", []string{"field checkpoint.dir", "holds 209715200 bytes, more than a checkpoint file ever does"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			config := filepath.Join(t.TempDir(), "c.yaml")
			os.WriteFile(config, []byte(`
http: { enabled: false }
input:
  aws_kinesis_streams:
    streams: [ orders ]
    region: us-east-1
    credentials: { id: fake, secret: fake }
    reader: polling
    checkpoint: `+c.checkpoint+`
output:
  drop: {}
`), 0o644)
			cmd := exec.Command(bin, "run", config)
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			started := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			var err error
			go func() { err = cmd.Wait(); close(done) }()
			// The peak RSS as the kernel keeps it for the process's own
			// memory (VmHWM), read until it exits: the rusage of a child
			// counts the memory of this test process it was forked from.
			var peak int64
			for polling := true; polling; {
				select {
				case <-done:
					polling = false
				case <-time.After(20 * time.Second):
					cmd.Process.Kill()
					<-done
					t.Fatalf("the binary still runs 20 s after starting; output:\n%s", buf.Bytes())
				case <-time.After(2 * time.Millisecond):
					if kib := vmHWM(cmd.Process.Pid); kib > peak {
						peak = kib
					}
				}
			}
			out := buf.Bytes()
			if err == nil {
				t.Fatalf("the binary exited 0; output:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Fatalf("the binary's output does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(c.name, "checkpoint file") {
				if took := time.Since(started); took > 5*time.Second || peak>>10 > 100 || peak == 0 {
					t.Fatalf("the binary exited after %v at a peak RSS of %d MiB (0: never read), want within 5 s and 100 MiB", took.Round(time.Millisecond), peak>>10)
				}
			}
		})
	}
}

// vmHWM returns the peak resident memory of process pid so far, in KiB, as
// /proc says; 0 when it cannot be read (the process is gone).
func vmHWM(pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib
		}
	}
	return 0
}

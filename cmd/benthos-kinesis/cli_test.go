package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
		{args: []string{"echo", good}, want: []string{"SECRET_SCRUBBED", "AKID"}, not: []string{"topsecret", "sessiontoken"}},
		{args: []string{"--version"}, want: []string{"Version:"}},
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

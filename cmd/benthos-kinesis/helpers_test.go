package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// startFake starts the fake Kinesis over TLS (HTTP/2, as AWS serves
// fan-out) for t, with opts, and writes its certificate to dir/ca.pem for
// the binary to trust (tls.root_cas_file, --ca-file).
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

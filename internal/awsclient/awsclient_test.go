package awsclient

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStreamRef(t *testing.T) {
	for _, c := range []struct {
		in, name, arn, region, err string
	}{
		{in: "orders", name: "orders"},
		{in: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", name: "orders", arn: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", region: "eu-west-1"},
		{in: "arn:aws:kinesis:eu-west-1:12:stream/orders", err: `"arn:aws:kinesis:eu-west-1:12:stream/orders": not a Kinesis stream ARN`},
		{in: "or ders", err: `"or ders": not a stream name`},
	} {
		ref, region, err := ParseStreamRef(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || ref.Name != c.name || ref.ARN != c.arn || region != c.region {
			t.Errorf("%q: %+v %q %v", c.in, ref, region, err)
		}
	}
}

// TestLoadWithoutRegion: no region anywhere is ErrNoRegion, which the input
// and the commands word in their own terms (a field, a flag).
func TestLoadWithoutRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if _, err := Load(context.Background(), Settings{}); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("Load without a region: %v, want ErrNoRegion", err)
	}
	cfg, err := Load(context.Background(), Settings{Region: "eu-west-1", ID: "a", Secret: "b"})
	if err != nil || cfg.Region != "eu-west-1" {
		t.Fatalf("Load with a region: %v %v", cfg.Region, err)
	}
}

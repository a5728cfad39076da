package input

import (
	"encoding/json"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"gopkg.in/yaml.v3"
)

// digestSpec stands for the Benthos config as the CLI parses it: the
// parts compared, and one that is not.
func digestSpec() *service.ConfigSpec {
	return service.NewConfigSpec().Fields(
		service.NewAnyField("input"),
		service.NewAnyField("output"),
		service.NewAnyField("pipeline").Optional(),
		service.NewAnyListField("processor_resources").Optional(),
		service.NewAnyField("http").Optional(),
	)
}

func digestOf(t *testing.T, conf string) map[string]string {
	t.Helper()
	pc, err := digestSpec().ParseYAML(conf, nil)
	if err != nil {
		t.Fatal(err)
	}
	return digestConfig(pc)
}

// TestConfigDigestComparesWhatDecidesTheRecords: instance ids, the http
// section, key order and where a field sits in the file make no
// difference; any other value of a part does, and only that part's digest
// changes.
func TestConfigDigestComparesWhatDecidesTheRecords(t *testing.T) {
	base := digestOf(t, `
input: { aws_kinesis_streams: { streams: [ orders ], checkpoint: { dynamodb: { table: t, instance_id: a-1 } } } }
output: { drop: {} }
http: { address: 0.0.0.0:4195 }
`)
	for _, want := range []string{"input", "output", digestVersion} {
		if base[want] == "" {
			t.Fatalf("no digest of %s: %v", want, base)
		}
	}
	if _, ok := base["http"]; ok {
		t.Fatalf("the http section is compared: %v", base)
	}
	same := digestOf(t, `
http: { address: 0.0.0.0:4196 }
output:
  drop: {}
input:
  aws_kinesis_streams:
    checkpoint: { dynamodb: { instance_id: b-2, table: t } }
    streams: [ orders ]
`)
	if same["input"] != base["input"] || same["output"] != base["output"] {
		t.Errorf("the same pipeline with another instance id, order and http address differs: %v, %v", base, same)
	}
	other := digestOf(t, `
input: { aws_kinesis_streams: { streams: [ orders ], checkpoint: { dynamodb: { table: t, instance_id: a-1 } } } }
output: { file: { path: /tmp/x } }
`)
	if other["output"] == base["output"] || other["input"] != base["input"] {
		t.Errorf("another output: %v, want only the output's digest changed from %v", other, base)
	}
}

// TestConfigDigestReadsYAMLNodes: a component's fields come as YAML nodes,
// with their lines; the digest reads their values.
func TestConfigDigestReadsYAMLNodes(t *testing.T) {
	var a, b yaml.Node
	if err := yaml.Unmarshal([]byte("drop: {}\n"), &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte("\n\n\ndrop: {}\n"), &b); err != nil {
		t.Fatal(err)
	}
	x, y := digestJSON(t, withoutInstanceIDs(&a)), digestJSON(t, withoutInstanceIDs(&b))
	if x != y || x != `{"drop":{}}` {
		t.Errorf("one value on other lines: %s and %s, want both {\"drop\":{}}", x, y)
	}
}

func digestJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConfigDigestWithoutAConfig: a command that runs the hook without a
// config (studio pull) gets no digest, and no panic.
func TestConfigDigestWithoutAConfig(t *testing.T) {
	if d, ok := safeDigest(nil); ok || d != nil {
		t.Fatalf("digest of no config: %v, %v", d, ok)
	}
	if d, ok := safeDigest(&service.ParsedConfig{}); ok || d != nil {
		t.Fatalf("digest of an empty ParsedConfig: %v, %v", d, ok)
	}
}

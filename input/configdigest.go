package input

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"github.com/redpanda-data/benthos/v4/public/service"
	ucli "github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// Instances of one lease group share a stream's shards, so they must run
// one pipeline: two different pipelines in one group (a copied config, say
// an archiver and an indexer given the same table) each see only part of
// the stream, and nothing in the data says so. Each instance publishes a
// digest of each part of its config with its heartbeat, and each compares
// the others' with its own (leasecoord).
//
// The digest is of the config files as written, before environment
// variables are filled in: the instances of one Deployment run one file
// with ${HOSTNAME} or ${POD_NAME} in an output path, a client id or a
// prefix, and are one pipeline. (Digested after the variables were
// filled in, every healthy fleet of that kind reported a mismatch.) What
// the files say differently (an output, a processor, an input) still
// differs, and so does a variable's name.

// digestParts are the parts of a config compared: what decides what is
// done with the records. The http server, logger, metrics and tracer may
// differ between instances of one pipeline.
var digestParts = []string{
	"input", "buffer", "pipeline", "output",
	"input_resources", "processor_resources", "output_resources", "cache_resources", "rate_limit_resources",
}

// digestVersion is the part that says which build published the digests:
// parts compare only between instances of one build, as another may fill
// in other defaults (a rolling upgrade is no pipeline mismatch).
const digestVersion = "build"

// pipelineDigest is the digest of the running config's parts, set by the
// CLI option as the config is read; nil when unknown (the input was not
// started by a CLI with CLIOpt).
var pipelineDigest atomic.Pointer[map[string]string]

// configFiles are the files a run reads its config from: the main config
// and the resources files (globs), as given on the command line.
type configFiles struct {
	main      string
	resources []string
}

// runFiles names the files of a run as Benthos's CLI finds them: -c (or
// run's argument) and -r. None in streams mode, or where the main config
// is found in a default path.
func runFiles(c *ucli.Context) configFiles {
	f := configFiles{main: c.String("config"), resources: c.StringSlice("resources")}
	if f.main == "" && c.Command != nil && c.Command.Name == "run" && c.Args().Len() > 0 {
		f.main = c.Args().First()
	}
	if c.Command != nil && c.Command.Name == "streams" {
		return configFiles{}
	}
	return f
}

// digestFiles is digestConfig of the files as written: their YAML, with
// ${VARIABLE} references as they stand. Nil without a main file.
func digestFiles(f configFiles) (map[string]string, error) {
	if f.main == "" {
		return nil, nil
	}
	doc, err := readYAML(f.main)
	if err != nil {
		return nil, err
	}
	paths, err := expandGlobs(f.resources)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		res, err := readYAML(p)
		if err != nil {
			return nil, err
		}
		for k, v := range res {
			if l, ok := v.([]any); ok && strings.HasSuffix(k, "_resources") {
				prev, _ := doc[k].([]any)
				doc[k] = append(prev, l...)
			}
		}
	}
	out := map[string]string{digestVersion: buildID()}
	for _, part := range digestParts {
		if v, ok := doc[part]; ok {
			out[part] = digestValue(v)
		}
	}
	return out, nil
}

// readYAML reads a config file as plain values, nothing filled in.
func readYAML(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// safeDigest is digestConfig of a config that may not be there: some
// commands (studio pull) call the hook without one, and a config the
// digest cannot read is no reason to stop the binary.
func safeDigest(pc *service.ParsedConfig) (d map[string]string, ok bool) {
	defer func() {
		if recover() != nil {
			d, ok = nil, false
		}
	}()
	if pc == nil {
		return nil, false
	}
	return digestConfig(pc), true
}

// digestConfig returns a digest of each part of the config present, and the
// build that made them. Instance ids are left out: they differ by design.
func digestConfig(pc *service.ParsedConfig) map[string]string {
	out := map[string]string{digestVersion: buildID()}
	for _, part := range digestParts {
		if !pc.Contains(part) {
			continue
		}
		out[part] = digestPart(pc, part)
	}
	return out
}

// yamlNode is a YAML node as the parsed config holds a component's fields
// (*yaml.Node of gopkg.in/yaml.v3, with its lines and columns).
type yamlNode interface{ Decode(v any) error }

// digestPart is the digest of one part of the config, or "unreadable" when
// the part cannot be read as plain values (then two instances compare
// equal on it only if neither can read it).
func digestPart(pc *service.ParsedConfig, part string) string {
	v, err := pc.FieldAny(part)
	if err != nil {
		return "unreadable"
	}
	return digestValue(v)
}

// digestValue is the digest of a part's value.
func digestValue(v any) string {
	b, err := json.Marshal(withoutInstanceIDs(v))
	if err != nil {
		return "unreadable"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// withoutInstanceIDs returns v as plain values (YAML nodes decoded: where a
// field sits in the file is no difference) without any instance_id field,
// at any depth.
func withoutInstanceIDs(v any) any {
	if n, ok := v.(yamlNode); ok {
		var plain any
		if err := n.Decode(&plain); err == nil {
			v = plain
		}
	}
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			if k != fDynamoInstanceID {
				m[k] = withoutInstanceIDs(x)
			}
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = withoutInstanceIDs(x)
		}
		return l
	}
	return v
}

// buildID names the build of this binary: its module version and VCS
// revision, as Go recorded them.
func buildID() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	id := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
			id += " " + s.Value
		}
	}
	return id
}

// currentDigest is the digest to publish, nil when unknown.
func currentDigest() map[string]string {
	if d := pipelineDigest.Load(); d != nil {
		return *d
	}
	return nil
}

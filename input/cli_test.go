package input

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	ucli "github.com/urfave/cli/v2"
)

// TestLintTypesLintsTheRestWithTheCLIsEnvironment: when lint refuses a
// value of the input's config, the rest of the config is linted against
// the components of the environment the CLI runs with: a processor that
// only a binary's own environment holds is no lint under
// CLIOptWithEnvironment, and is one under the global environment.
func TestLintTypesLintsTheRestWithTheCLIsEnvironment(t *testing.T) {
	t.Parallel()
	env := service.NewEnvironment()
	if err := env.RegisterProcessor("only_in_this_binary", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Resources) (service.Processor, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	conf := "input:\n  aws_kinesis_streams:\n    streams: [a]\n    strict_order: sure\npipeline:\n  processors:\n    - only_in_this_binary: {}\noutput:\n  drop: {}\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	lint := func(env *service.Environment) (string, error) {
		var out bytes.Buffer
		app := &ucli.App{ErrWriter: &out, Commands: []*ucli.Command{{Name: "lint",
			Action: func(c *ucli.Context) error { return lintTypes(c, env) }}}}
		err := app.RunContext(context.Background(), []string{"benthos", "lint", path})
		return out.String(), err
	}
	typeLint := "(4,19) field strict_order: sure is a string; expected a bool"
	out, err := lint(env)
	if err == nil || !strings.Contains(out, typeLint) || strings.Contains(out, "only_in_this_binary") || strings.Count(out, "\n") != 1 {
		t.Fatalf("with the binary's environment: %v, lints:\n%s\nwant the type lint alone", err, out)
	}
	out, err = lint(service.GlobalEnvironment())
	if err == nil || !strings.Contains(out, typeLint) || !strings.Contains(out, "only_in_this_binary") {
		t.Fatalf("with the global environment: %v, lints:\n%s\nwant the type lint and one of the unknown processor", err, out)
	}
}

// TestLintTypesVerbose: with --verbose, as Benthos's lint, each file's
// verdict goes to stdout before the lints: FAILED for the one with a value
// of the wrong type, OK for a clean one.
func TestLintTypesVerbose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad, good := filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(bad, []byte("input:\n  aws_kinesis_streams:\n    streams: [a]\n    strict_order: sure\noutput:\n  drop: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte("input:\n  aws_kinesis_streams:\n    streams: [a]\n    reader: polling\noutput:\n  drop: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	app := &ucli.App{Writer: &stdout, ErrWriter: &stderr, Commands: []*ucli.Command{{Name: "lint",
		Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "verbose"}},
		Action: func(c *ucli.Context) error { return lintTypes(c, service.GlobalEnvironment()) }}}}
	if err := app.RunContext(context.Background(), []string{"benthos", "lint", "--verbose", bad, good}); err == nil {
		t.Fatal("lint passed a value of the wrong type")
	}
	// Coloured when the test's stdout is a terminal.
	plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(stdout.String(), "")
	if want := bad + ": FAILED\n" + good + ": OK\n"; plain != want {
		t.Fatalf("verdicts %q, want %q", plain, want)
	}
	if !strings.Contains(stderr.String(), bad+"(4,19) field strict_order: sure") {
		t.Fatalf("lints %q", stderr.String())
	}
}

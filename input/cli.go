package input

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fatih/color"
	"github.com/redpanda-data/benthos/v4/public/service"
	ucli "github.com/urfave/cli/v2"
)

// CLIOpt is what a Benthos CLI needs of this input beyond its plugin:
//
//   - the instances of one lease group compare their pipeline configs (see
//     checkpoint.dynamodb.group): each publishes a digest of its config in
//     the lease table, and reports any instance of its group whose digest
//     differs;
//   - lint refuses a value of the input's config that its field's type
//     cannot take (strict_order: sure, checkpoint.limit: '100'), which
//     Benthos's linter passes and run refuses.
//
// The benthos-kinesis binary uses it; so should a Benthos binary of your
// own that holds this input (one that runs with an environment of its own
// uses CLIOptWithEnvironment).
func CLIOpt() service.CLIOptFunc { return CLIOptWithEnvironment(service.GlobalEnvironment()) }

// CLIOptWithEnvironment is CLIOpt for a CLI that runs with env
// (service.CLIOptSetEnvironment): when lint refuses a value of the input's
// config, it lints the rest of the config against env's components, as
// Benthos's lint would.
func CLIOptWithEnvironment(env *service.Environment) service.CLIOptFunc {
	var files configFiles
	atRun := service.CLIOptCustomRunFlags(nil, func(c *ucli.Context) error {
		if c.Command != nil && c.Command.Name == "lint" {
			return lintTypes(c, env)
		}
		files = runFiles(c)
		return nil
	})
	onParse := service.CLIOptOnConfigParse(func(pc *service.ParsedConfig) error {
		pipelineDigest.Store(nil)
		d, err := digestFiles(files)
		if err != nil || d == nil {
			// Not from files this process can name (streams mode, a
			// default path), or not readable again: the parsed config's.
			var ok bool
			if d, ok = safeDigest(pc); !ok {
				return nil
			}
		}
		pipelineDigest.Store(&d)
		return nil
	})
	return func(b *service.CLIOptBuilder) {
		atRun(b)
		onParse(b)
	}
}

// CLIOptComparePipelines is CLIOpt, by its former name.
//
// Deprecated: use CLIOpt, which also lints the input's value types.
func CLIOptComparePipelines() service.CLIOptFunc { return CLIOpt() }

// lintTypes runs, before Benthos's lint, the type checks of the input's
// configs in the files lint was given (typeLints). With none found, lint
// goes on as Benthos's; otherwise every lint of those files is printed,
// Benthos's included, as Benthos prints them (in red a file not read or a
// component missing, in yellow the rest, where the terminal shows colours;
// with --verbose each file's verdict first), and lint fails. The snippets
// of .md files, which Benthos's lint reads, are not linted then: the
// verdict is failed already.
func lintTypes(c *ucli.Context, env *service.Environment) error {
	type found struct {
		path         string
		line, column int
		what         string
		severe       bool // not read, or a component missing: red
	}
	targets := lintTargets(c)
	var out, unread []found
	docs := map[string][]byte{}
	for _, p := range targets {
		doc, err := os.ReadFile(p)
		if err != nil {
			// Benthos's lint says so when it runs; when this one fires, it
			// does.
			unread = append(unread, found{p, 1, 1, fmt.Sprintf("failed to read config: %v", err), true})
			continue
		}
		if bytes.HasPrefix(doc, []byte("# BENTHOS LINT DISABLE")) {
			continue
		}
		docs[p] = doc
		for _, l := range typeLints(doc) {
			out = append(out, found{p, l.line, l.column, l.what, false})
		}
	}
	if len(out) == 0 {
		return nil
	}
	out = append(out, unread...)
	linter := env.FullConfigSchema("", "").NewStreamConfigLinter().
		SetRejectDeprecated(c.Bool("deprecated")).SetRequireLabels(c.Bool("labels")).SetSkipEnvVarCheck(c.Bool("skip-env-var-check"))
	for _, p := range targets {
		doc, ok := docs[p]
		if !ok {
			continue
		}
		lints, err := linter.LintYAML(doc)
		if err != nil {
			out = append(out, found{p, 1, 1, err.Error(), true})
		}
		for _, l := range lints {
			out = append(out, found{p, l.Line, l.Column, l.What, l.Type == service.LintFailedRead || l.Type == service.LintComponentMissing})
		}
	}
	slices.SortStableFunc(out, func(a, b found) int {
		return cmp.Or(cmp.Compare(slices.Index(targets, a.path), slices.Index(targets, b.path)), cmp.Compare(a.line, b.line), cmp.Compare(a.column, b.column))
	})
	stdout, stderr := io.Writer(os.Stdout), io.Writer(os.Stderr)
	if c.App != nil && c.App.Writer != nil {
		stdout = c.App.Writer
	}
	if c.App != nil && c.App.ErrWriter != nil {
		stderr = c.App.ErrWriter
	}
	red, yellow, green := color.New(color.FgRed).SprintFunc(), color.New(color.FgYellow).SprintFunc(), color.New(color.FgGreen).SprintFunc()
	if c.Bool("verbose") {
		for _, p := range targets {
			verdict := green("OK")
			if slices.ContainsFunc(out, func(f found) bool { return f.path == p }) {
				verdict = red("FAILED")
			}
			fmt.Fprintf(stdout, "%v: %v\n", p, verdict)
		}
	}
	for _, l := range slices.Compact(out) {
		line := fmt.Sprintf("%s(%d,%d) %s\n", l.path, l.line, l.column, l.what)
		if l.severe {
			fmt.Fprint(stderr, red(line))
		} else {
			fmt.Fprint(stderr, yellow(line))
		}
	}
	return errors.New("lint errors")
}

// lintTargets are the files lint reads, as Benthos's lint finds them: its
// arguments (globs, and paths ending in ... walked for .yaml and .yml
// files), -c, and the files of the -r globs as run reads them.
func lintTargets(c *ucli.Context) []string {
	var targets []string
	for _, arg := range c.Args().Slice() {
		if root, ok := strings.CutSuffix(arg, "..."); ok {
			_ = filepath.WalkDir(cmp.Or(root, "."), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && (filepath.Ext(p) == ".yaml" || filepath.Ext(p) == ".yml") {
					targets = append(targets, p)
				}
				return nil
			})
			continue
		}
		paths, err := expandGlobs([]string{arg})
		if err != nil {
			paths = []string{arg} // a bad pattern: said when it is read
		}
		targets = append(targets, paths...)
	}
	if conf := c.String("config"); conf != "" {
		targets = append(targets, conf)
	}
	if paths, err := expandGlobs(c.StringSlice("resources")); err == nil {
		targets = append(targets, paths...)
	}
	var out []string
	for _, p := range targets {
		if filepath.Ext(p) != ".md" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

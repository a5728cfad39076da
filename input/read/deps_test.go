package read

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadingNeedsNeitherTheComponentNorTheLeaseTable: what a reader needs
// arrives in its Env, so the package imports neither the component (input)
// nor a coordination's implementation (leasecoord, lease): the compiler keeps
// the direction cmd -> input -> read -> coord. The check follows the
// module's own imports of every non-test file, transitively.
func TestReadingNeedsNeitherTheComponentNorTheLeaseTable(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var module string
	for _, line := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			module = strings.TrimSpace(m)
		}
	}
	deps := map[string]bool{}
	var walk func(rel string)
	walk = func(rel string) {
		files, err := filepath.Glob(filepath.Join(root, rel, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				dep, ok := strings.CutPrefix(p, module+"/")
				if !ok || deps[dep] {
					continue
				}
				deps[dep] = true
				walk(dep)
			}
		}
	}
	walk("input/read")
	if !deps["input/coord"] {
		t.Fatalf("the walk found no import of input/coord (found %v): it follows nothing", deps)
	}
	for _, banned := range []string{"input", "input/leasecoord", "input/lease", "cmd"} {
		if deps[banned] {
			t.Errorf("package read depends on %s/%s: what a reader needs must come in its Env", module, banned)
		}
	}
}

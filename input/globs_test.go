package input

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestExpandGlobsAsBenthosReadsThem: patterns expand as filepath.Glob
// does, ** standing for any number of directories (none too), a path with
// no pattern stays as it is found or not (so that reading it says it is
// missing), a pattern that matches nothing stands for nothing, and each
// file comes once, in the order of the patterns.
func TestExpandGlobsAsBenthosReadsThem(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"main.yaml", "res/a.yaml", "res/b.yml", "res/deep/c.yaml", "res/deep/er/d.yaml", "other/e.yaml"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := func(fs ...string) []string {
		var out []string
		for _, f := range fs {
			out = append(out, filepath.Join(dir, f))
		}
		return out
	}
	for _, c := range []struct {
		patterns []string
		want     []string
	}{
		{in("res/*.yaml"), in("res/a.yaml")},
		{in("res/**/*.yaml"), in("res/a.yaml", "res/deep/c.yaml", "res/deep/er/d.yaml")},
		{in("**/c.yaml"), in("res/deep/c.yaml")},
		{in("res/**"), in("res/a.yaml", "res/b.yml", "res/deep/c.yaml", "res/deep/er/d.yaml")},
		{in("res/deep/**/d.yaml"), in("res/deep/er/d.yaml")},
		{in("missing.yaml"), in("missing.yaml")},
		{in("missing/*.yaml"), nil},
		{in("missing/**/*.yaml"), nil},
		{in("main.yaml", "*.yaml", "res/a.yaml", "res/*.yaml"), in("main.yaml", "res/a.yaml")},
	} {
		got, err := expandGlobs(c.patterns)
		if err != nil {
			t.Fatalf("%v: %v", c.patterns, err)
		}
		slices.Sort(c.want)
		if g := slices.Sorted(slices.Values(got)); !slices.Equal(g, c.want) {
			t.Errorf("%v: %v, want %v", c.patterns, got, c.want)
		}
	}
	// A directory reached by a symbolic link is walked as run walks it.
	if err := os.Symlink(filepath.Join(dir, "res"), filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	if got, err := expandGlobs(in("linked/**/d.yaml")); err != nil || !slices.Equal(got, in("linked/deep/er/d.yaml")) {
		t.Errorf("through a symbolic link: %v, %v", got, err)
	}
	// A relative pattern walks the working directory's tree.
	t.Chdir(dir)
	got, err := expandGlobs([]string{"**/d.yaml", "main.yaml"})
	if want := []string{"res/deep/er/d.yaml", "main.yaml"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("relative: %v, %v; want %v", got, err, want)
	}
}

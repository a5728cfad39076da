package input

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// expandGlobs names the files that config paths stand for, as Benthos's CLI
// reads them (-r, lint's arguments): each pattern as filepath.Glob expands
// it, where ** stands for any number of directories (none too), and a path
// with no pattern in it as it is, found or not (reading it then says it is
// not there). In the order of the patterns, each file once.
func expandGlobs(patterns []string) ([]string, error) {
	var out []string
	for _, p := range patterns {
		var paths []string
		var err error
		if strings.Contains(p, "**") {
			paths, err = globTree(p)
		} else {
			paths, err = filepath.Glob(p)
		}
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 && !hasPattern(p) {
			paths = []string{p}
		}
		for _, path := range paths {
			if !slices.Contains(out, path) {
				out = append(out, path)
			}
		}
	}
	return out, nil
}

// hasPattern reports whether a path holds a character that filepath.Match
// reads as a pattern.
func hasPattern(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// globTree expands a pattern holding **: it walks the directory before the
// first element that holds a pattern, and keeps the files whose paths match.
func globTree(pattern string) ([]string, error) {
	pattern = filepath.Clean(pattern)
	parts := strings.Split(pattern, string(filepath.Separator))
	root := 0
	for root < len(parts) && !hasPattern(parts[root]) {
		root++
	}
	dir := filepath.Join(parts[:root]...)
	if strings.HasPrefix(pattern, string(filepath.Separator)) {
		dir = string(filepath.Separator) + dir
	}
	if dir == "" {
		dir = "."
	}
	// WalkDir does not enter a root that is a symbolic link to a
	// directory; Benthos's walk (of run's -r) does.
	walk := dir
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		walk = dir + string(filepath.Separator)
	}
	var out []string
	err := filepath.WalkDir(walk, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == walk {
				return fs.SkipAll // no such directory: nothing matches
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return nil
		}
		ok, err := matchElems(parts[root:], strings.Split(rel, string(filepath.Separator)))
		if err != nil {
			return err
		}
		if ok {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}

// matchElems matches path elements against pattern elements, ** matching
// any number of elements.
func matchElems(pattern, elems []string) (bool, error) {
	for len(pattern) > 0 {
		if pattern[0] == "**" {
			for i := 0; i <= len(elems); i++ {
				if ok, err := matchElems(pattern[1:], elems[i:]); ok || err != nil {
					return ok, err
				}
			}
			return false, nil
		}
		if len(elems) == 0 {
			return false, nil
		}
		ok, err := filepath.Match(pattern[0], elems[0])
		if !ok || err != nil {
			return false, err
		}
		pattern, elems = pattern[1:], elems[1:]
	}
	return len(elems) == 0, nil
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"sync"
	"testing"
)

// The binary's test pipelines write JSON lines to files that the tests poll
// while they grow, some to hundreds of thousands of lines. Each file is read
// from where the last read of it ended, so that polling costs what was
// appended since, not the whole file again.

// outputTails holds one *outputTail per file path read.
var outputTails sync.Map

// outputTail is what was read of one file: the bytes of its complete lines
// and those lines, counted or decoded.
type outputTail struct {
	mu     sync.Mutex
	offset int64
	lines  int
	values any // []T of the readJSONLines that read it
}

func tailOf(path string) *outputTail {
	v, _ := outputTails.LoadOrStore(path, &outputTail{})
	return v.(*outputTail)
}

// appended returns the complete lines appended to the file since the last
// call and moves past them; a last line cut short (by a kill, or being
// written) is left for a later call. A file that does not exist yet has no
// lines; one shorter than what was read (replaced) is read anew, and reset
// tells.
func (o *outputTail) appended(t *testing.T, path string) (data []byte, reset bool) {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < o.offset {
		o.offset, o.lines, o.values, reset = 0, 0, nil, true
	}
	if _, err := f.Seek(o.offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	data, err = io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	o.offset += int64(len(data))
	o.lines += bytes.Count(data, []byte("\n"))
	return data, reset
}

// readJSONLines decodes each complete line of the file at path into a T
// and hands it to add, in order; a last line cut short by a kill is
// ignored. A file that does not exist yet has no lines. Each line is decoded
// once, by the first call that sees it: a file is read with one T only.
func readJSONLines[T any](t *testing.T, path string, add func(T)) {
	t.Helper()
	o := tailOf(path)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.values == nil {
		o.offset, o.lines = 0, 0 // only counted so far: decode from the start
	}
	data, _ := o.appended(t, path)
	values, _ := o.values.([]T)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Bytes(), err)
		}
		values = append(values, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if values == nil {
		values = []T{} // decoded, if empty
	}
	o.values = values
	for _, v := range values {
		add(v)
	}
}

// memCountLines counts the complete lines of a file; 0 if it does not exist.
func memCountLines(t *testing.T, path string) int {
	t.Helper()
	o := tailOf(path)
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, reset := o.appended(t, path); reset {
		o.values = nil
	}
	return o.lines
}

package main

import (
	"bytes"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
)

// progress follows a process run's output file as it grows: each line is
// a record whose data starts with its index, and shard i holds the indexes
// from firsts[i] on. It counts every record output once or more, and
// samples the spread of the shards' lag: the records each shard has left,
// against the median shard's.
type progress struct {
	firsts  []int // index of each shard's first record, ascending
	sizes   []int // records of each shard
	left    []int // records each shard has not output yet
	seen    []bool
	repeats int
	offset  int64
	partial []byte // a line not yet ended

	// spread is the largest ratio of a shard's records left to the median
	// shard's, over the samples taken once every shard had output a record
	// and while the median shard had at least a tenth of its records left.
	spread float64
}

func newProgress(f *fake) *progress {
	p := &progress{seen: make([]bool, f.cfg.records)}
	first := 0
	for i := range f.cfg.shards {
		n := f.perShard(i)
		p.firsts = append(p.firsts, first)
		p.sizes = append(p.sizes, n)
		p.left = append(p.left, n)
		first += n
	}
	return p
}

// read takes in what was appended to the file at path since the last call,
// then samples the spread.
func (p *progress) read(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(p.offset, io.SeekStart); err != nil {
		return
	}
	data, _ := io.ReadAll(f)
	p.offset += int64(len(data))
	data = append(p.partial, data...)
	end := bytes.LastIndexByte(data, '\n')
	lines := data[:end+1]
	p.partial = slices.Clone(data[end+1:])
	for len(lines) > 0 {
		nl := bytes.IndexByte(lines, '\n')
		p.record(lines[:nl])
		lines = lines[nl+1:]
	}
	p.sample()
}

func (p *progress) record(line []byte) {
	digits := 0
	for digits < len(line) && line[digits] >= '0' && line[digits] <= '9' {
		digits++
	}
	n, err := strconv.Atoi(string(line[:digits]))
	if err != nil || n >= len(p.seen) {
		return
	}
	if p.seen[n] {
		p.repeats++
		return
	}
	p.seen[n] = true
	i := sort.SearchInts(p.firsts, n+1) - 1
	p.left[i]--
}

func (p *progress) sample() {
	for i, l := range p.left {
		if l == p.sizes[i] {
			return // a shard has not started
		}
	}
	sorted := slices.Sorted(slices.Values(p.left))
	median := sorted[len(sorted)/2]
	if median == 0 || median < p.sizes[0]/10 {
		return
	}
	p.spread = max(p.spread, float64(sorted[len(sorted)-1])/float64(median))
}

// missing is how many records were not output.
func (p *progress) missing() int {
	n := 0
	for _, s := range p.seen {
		if !s {
			n++
		}
	}
	return n
}

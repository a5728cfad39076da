package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync/atomic"
	"time"
)

// result is one run of a scenario. Everything in the process counts: the
// fake's CPU time and allocations are in every scenario's figures.
type result struct {
	records, bytes int64
	wall           time.Duration // begin to end
	first          time.Duration // begin to the first record
	cpu            time.Duration // user and system, all threads
	mallocs        uint64        // heap objects allocated
	baseHeap       uint64        // live heap at begin, just after a GC
	peakHeap       uint64        // most heap object bytes seen (live and garbage)
}

func (r result) rate() float64 { return float64(r.records) / r.wall.Seconds() }

// cpuPerRecord is in microseconds.
func (r result) cpuPerRecord() float64 {
	return float64(r.cpu.Nanoseconds()) / 1e3 / float64(r.records)
}

func (r result) String() string {
	return fmt.Sprintf("%9.0f records/s in %v, first after %v, %.2f µs CPU and %.1f allocations per record, peak heap %.0f MB",
		r.rate(), r.wall.Round(time.Millisecond), r.first.Round(time.Millisecond),
		r.cpuPerRecord(), float64(r.mallocs)/float64(r.records), float64(r.peakHeap)/1e6)
}

// meter measures one run; see scenario.
type meter struct {
	records, bytes atomic.Int64
	first          atomic.Int64 // ns from begin to the first record; 0 before it

	start    time.Time
	cpu0     time.Duration
	mallocs0 uint64
	stopPeak func() uint64
	r        result
}

func (m *meter) begin() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mallocs0, m.r.baseHeap = ms.Mallocs, ms.HeapAlloc
	m.stopPeak = samplePeakHeap()
	m.cpu0 = processCPU()
	m.start = time.Now()
}

func (m *meter) count(records, bytes int) {
	if m.first.Load() == 0 {
		m.first.CompareAndSwap(0, int64(time.Since(m.start))+1)
	}
	m.records.Add(int64(records))
	m.bytes.Add(int64(bytes))
}

func (m *meter) end() {
	m.r.wall = time.Since(m.start)
	m.r.cpu = processCPU() - m.cpu0
	m.r.peakHeap = m.stopPeak()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.r.mallocs = ms.Mallocs - m.mallocs0
	m.r.first = time.Duration(m.first.Load())
}

// measure runs s once, labelled for CPU profiles, and checks that it read
// every record exactly once.
func measure(ctx context.Context, f *fake, s scenario) (result, error) {
	m := &meter{}
	var err error
	pprof.Do(ctx, pprof.Labels("scenario", s.name), func(ctx context.Context) {
		err = s.read(ctx, f, m)
	})
	if err != nil {
		return result{}, err
	}
	m.r.records, m.r.bytes = m.records.Load(), m.bytes.Load()
	if want := int64(f.cfg.records); m.r.records != want || m.r.bytes != want*int64(f.cfg.size) {
		return result{}, fmt.Errorf("read %d records of %d bytes in all, want exactly %d of %d", m.r.records, m.r.bytes, want, want*int64(f.cfg.size))
	}
	return m.r, nil
}

// samplePeakHeap samples the bytes of heap objects every 2 ms until the
// returned function is called, which returns the most it saw.
func samplePeakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var peak atomic.Uint64
	peak.Store(read())
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		if v := read(); v > peak.Load() {
			peak.Store(v)
		}
		return peak.Load()
	}
}

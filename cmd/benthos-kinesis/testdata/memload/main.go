// Command memload is the Kinesis side of TestSlowOutputMemoryBounded: the
// in-process fake (HTTP/2 over TLS, as AWS serves fan-out) with one stream,
// and a producer writing 1 KiB records into it, in a process of its own.
//
// The test runs under the race detector; serving about 140 MiB of records
// (base64 in JSON events) and producing them cost that instrumented process
// about 38 CPU-seconds, against 5 here. The binary under test never ran in
// it: it is built and run apart, as this is.
//
// It listens on loopback, writes the fake's certificate to -ca-file and prints
// "ready <endpoint> <region>". Then it answers one line per command read on
// stdin:
//
//	subscriptions            -> subscriptions <open SubscribeToShard streams>
//	produce <backlog> <rate> -> producing (the backlog is written, the rest
//	                            follows at rate records per second)
//	big <shards> <bytes>     -> big <shards> (one record of <bytes> is
//	                            written to each of the first <shards>
//	                            shards, all at once)
//	bigagg <shards> <bytes>  -> bigagg <shards> (the same as one KPL
//	                            aggregate of user records of 1 MiB, or less
//	                            for the last, filling <bytes>)
//	stop                     -> produced <records> <seconds at rate>, once
//	                            the manifest is written
//
// It exits when stdin ends. Record i of shard s (round robin over the shards)
// has id "m-<s>-<i, 7 digits>", data the id padded to -record-size bytes with
// a pattern that depends on i, and partition key "key-<s>-<i mod 8>". The
// manifest (-manifest) has a line "<id> <partition key> <len>:<sha256>" per
// record written. A big record of shard s has id "b-<s>-<n, 7 digits>", a
// user record of a big aggregate "a-<s>-<n, 4 digits>-<j, 2 digits>".
// -max-record-kib sets the stream's MaxRecordSizeInKiB (records up to 10 MiB
// since 2025).
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "memload:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		stream     = flag.String("stream", "orders", "the stream to create and write")
		shards     = flag.Int("shards", 4, "its shards")
		recordSize = flag.Int("record-size", 1024, "bytes of data per record")
		activation = flag.Duration("consumer-activation-delay", 200*time.Millisecond, "how long a new consumer stays CREATING")
		caFile     = flag.String("ca-file", "", "where to write the fake's certificate (PEM)")
		manifest   = flag.String("manifest", "", "where to write what was produced, at stop")
		maxKiB     = flag.Int("max-record-kib", 1024, "the stream's MaxRecordSizeInKiB")
	)
	flag.Parse()
	if *caFile == "" || *manifest == "" {
		return errors.New("-ca-file and -manifest are required")
	}
	// Its warnings go to stderr, which the test keeps in a log it shows on
	// failure; stdout carries only the answers.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := kinesisfake.New(kinesisfake.TLS(), kinesisfake.Stream(*stream, *shards, kinesisfake.MaxRecordKiB(*maxKiB)),
		kinesisfake.ConsumerActivationDelay(*activation), kinesisfake.Logger(logger))
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := os.WriteFile(*caFile, srv.CertificatePEM(), 0o644); err != nil {
		return err
	}
	list, err := srv.Shards(*stream)
	if err != nil {
		return err
	}
	p := &producer{srv: srv, stream: *stream, shards: list, buf: make([]byte, *recordSize)}
	fmt.Printf("ready %s %s\n", srv.Endpoint(), srv.Region())

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		reply, err := p.command(strings.Fields(in.Text()), *manifest)
		if err != nil {
			return fmt.Errorf("%q: %w", in.Text(), err)
		}
		fmt.Println(reply)
	}
	p.stop()
	return in.Err()
}

type producer struct {
	srv    *kinesisfake.Server
	stream string
	shards []types.Shard
	buf    []byte

	done     chan struct{}
	finished chan struct{}
	start    time.Time
	end      time.Time
	err      error

	mu       sync.Mutex // guards n, big, extra and manifest while producing
	n        int        // records written, big ones included
	big      int        // rounds of big records written
	extra    int        // big records written (not of put's numbering)
	manifest []byte
}

func (p *producer) command(args []string, manifest string) (string, error) {
	switch {
	case len(args) == 1 && args[0] == "subscriptions":
		return fmt.Sprintf("subscriptions %d", p.srv.Subscriptions()), nil
	case len(args) == 3 && args[0] == "produce" && p.done == nil:
		backlog, err1 := strconv.Atoi(args[1])
		rate, err2 := strconv.Atoi(args[2])
		if err := errors.Join(err1, err2); err != nil {
			return "", err
		}
		if err := p.put(backlog); err != nil {
			return "", fmt.Errorf("writing the backlog: %w", err)
		}
		p.produce(backlog, rate)
		return "producing", nil
	case len(args) == 3 && (args[0] == "big" || args[0] == "bigagg"):
		shards, err1 := strconv.Atoi(args[1])
		size, err2 := strconv.Atoi(args[2])
		if err := errors.Join(err1, err2); err != nil {
			return "", err
		}
		if err := p.putBig(min(shards, len(p.shards)), size, args[0] == "bigagg"); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %d", args[0], shards), nil
	case len(args) == 1 && args[0] == "stop":
		if err := p.stop(); err != nil {
			return "", err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if err := os.WriteFile(manifest, p.manifest, 0o644); err != nil {
			return "", err
		}
		return fmt.Sprintf("produced %d %.3f", p.n, p.end.Sub(p.start).Seconds()), nil
	}
	return "", errors.New("unknown command, or not in this state")
}

// produce writes records at rate per second after the backlog, until stop.
func (p *producer) produce(backlog, rate int) {
	p.done, p.finished = make(chan struct{}), make(chan struct{})
	p.start = time.Now()
	go func() {
		defer close(p.finished)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				p.end = time.Now()
				return
			case <-tick.C:
			}
			if p.err = p.put(backlog + int(time.Since(p.start).Seconds()*float64(rate))); p.err != nil {
				p.end = time.Now()
				return
			}
		}
	}()
}

func (p *producer) stop() error {
	if p.done == nil {
		return nil
	}
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	<-p.finished
	return p.err
}

// putBig writes one record of size bytes to each of the first shards
// shards, all at once: a plain one, or a KPL aggregate of user records of
// 1 MiB (agg).
func (p *producer) putBig(shards, size int, agg bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, shards)
	lines := make([]string, shards)
	var wg sync.WaitGroup
	for s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := fmt.Sprintf("big-%d", s)
			fill := func(id string, n int) []byte {
				data := make([]byte, n)
				copy(data, id+"|")
				for j := len(id) + 1; j < n; j++ {
					data[j] = byte(j*31 + s)
				}
				sum := sha256.Sum256(data)
				lines[s] += fmt.Sprintf("%s %s %d:%s\n", id, pk, n, hex.EncodeToString(sum[:]))
				return data
			}
			var data []byte
			if agg {
				b := kpl.Builder{MaxSize: kpl.MaxStreamRecordSize}
				for j, left := 0, size; left > 0; j++ {
					n := min(left, 1<<20-64) // room for the aggregate's framing
					if errs[s] = b.Add(kpl.UserRecord{PartitionKey: pk, Data: fill(fmt.Sprintf("a-%d-%04d-%02d", s, p.big, j), n)}); errs[s] != nil {
						return
					}
					left -= 1 << 20
				}
				a, err := b.Build()
				if errs[s] = err; err != nil {
					return
				}
				data = a.Data
			} else {
				data = fill(fmt.Sprintf("b-%d-%07d", s, p.big), size)
			}
			if _, _, errs[s] = p.srv.PutWithHashKey(p.stream, *p.shards[s].HashKeyRange.StartingHashKey, pk, data); errs[s] != nil {
				lines[s] = ""
			}
		}()
	}
	wg.Wait()
	p.big++
	for _, l := range lines {
		p.manifest = append(p.manifest, l...)
		n := strings.Count(l, "\n")
		p.n += n
		p.extra += n
	}
	return errors.Join(errs...)
}

// put writes records until target have been written.
func (p *producer) put(target int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ; p.n-p.extra < target; p.n++ {
		k := p.n - p.extra
		s, i := k%len(p.shards), k/len(p.shards)
		id := fmt.Sprintf("m-%d-%07d", s, i)
		fill := []byte("|" + strconv.Itoa(i*7919+s))
		copy(p.buf, id)
		for j := len(id); j < len(p.buf); j += len(fill) {
			copy(p.buf[j:], fill)
		}
		pk := fmt.Sprintf("key-%d-%d", s, i%8)
		if _, _, err := p.srv.PutWithHashKey(p.stream, *p.shards[s].HashKeyRange.StartingHashKey, pk, p.buf); err != nil {
			return err
		}
		sum := sha256.Sum256(p.buf)
		p.manifest = fmt.Appendf(p.manifest, "%s %s %d:%s\n", id, pk, len(p.buf), hex.EncodeToString(sum[:]))
	}
	return nil
}

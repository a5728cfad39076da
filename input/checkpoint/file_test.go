package checkpoint

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const testARN = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"

func TestFileRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Load(ctx, testARN)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Shards) != 0 || !s.Created.IsZero() {
		t.Fatalf("new stream not empty: %+v", s)
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	s.Created = ts
	s.Shards["shardId-000000000000"] = Checkpoint{
		Start:    Start{Kind: "AT_TIMESTAMP", Timestamp: &ts},
		Position: &Position{Sequence: "4959", SubSequence: 3, Partial: true},
	}
	s.Shards["shardId-000000000001"] = Checkpoint{Start: Start{Kind: "TRIM_HORIZON"}, Ended: true}
	if err := f.Save(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f2, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	got, err := f2.Load(ctx, testARN)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Created.Equal(ts) || len(got.Shards) != 2 {
		t.Fatalf("loaded %+v", got)
	}
	cp := got.Shards["shardId-000000000000"]
	if cp.Position == nil || *cp.Position != (Position{Sequence: "4959", SubSequence: 3, Partial: true}) || !cp.Start.Timestamp.Equal(ts) {
		t.Fatalf("shard 0 loaded as %+v", cp)
	}
	if !got.Shards["shardId-000000000001"].Ended {
		t.Fatal("shard 1 lost its end")
	}
	if filepath.Base(f2.Path(testARN)) != "us-east-1.000000000000.orders.json" {
		t.Fatalf("file name %s", f2.Path(testARN))
	}
}

func TestFileLockRefusesSecondUser(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Load(context.Background(), testARN); err != nil {
		t.Fatal(err)
	}
	b, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Load(context.Background(), testARN)
	if err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("second store got %v, want a lock error", err)
	}
	a.Close()
	if _, err := b.Load(context.Background(), testARN); err != nil {
		t.Fatalf("after the first store closed: %v", err)
	}
	b.Close()
}

func TestFileRejectsCorruptFile(t *testing.T) {
	dir := t.TempDir()
	f, _ := OpenFile(dir)
	defer f.Close()
	if err := os.WriteFile(f.Path(testARN), []byte(`{"version":1,"stream_arn":`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := f.Load(context.Background(), testARN)
	if err == nil || !strings.Contains(err.Error(), "not a valid checkpoint file") || !strings.Contains(err.Error(), f.Path(testARN)) {
		t.Fatalf("got %v", err)
	}
}

func TestOpenFileUnwritableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores permission bits; use a path under a regular file instead.
		file := filepath.Join(t.TempDir(), "file")
		os.WriteFile(file, nil, 0o644)
		_, err := OpenFile(filepath.Join(file, "sub"))
		if err == nil || !strings.Contains(err.Error(), "cannot be created") {
			t.Fatalf("got %v", err)
		}
		return
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o700)
	_, err := OpenFile(dir)
	if err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("got %v", err)
	}
}

// TestFileSurvivesSIGKILL saves in a loop in a child process and kills it at
// varying moments: the file must always load, and hold one of the states that
// the child saved (a counter that only grows).
func TestFileSurvivesSIGKILL(t *testing.T) {
	if dir := os.Getenv("CHECKPOINT_KILL_CHILD_DIR"); dir != "" {
		saveForever(dir)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	last := -1
	for round := range 12 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileSurvivesSIGKILL$")
		cmd.Env = append(os.Environ(), "CHECKPOINT_KILL_CHILD_DIR="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The child says when its first save of this round is done; it is
		// killed a varying moment later, while it saves on.
		saved := make(chan struct{})
		go func() {
			bufio.NewReader(stdout).ReadString('\n')
			close(saved)
		}()
		select {
		case <-saved:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("round %d: the child did not save within 30 s", round)
		}
		time.Sleep(time.Duration(round*7) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		f, err := OpenFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := f.Load(context.Background(), testARN)
		f.Close()
		if err != nil {
			t.Fatalf("round %d: after SIGKILL the file does not load: %v", round, err)
		}
		cp, ok := s.Shards["shardId-000000000000"]
		if !ok || cp.Position == nil {
			t.Fatalf("round %d: the child saved, but after SIGKILL the file holds no position", round)
		}
		n, err := strconv.Atoi(cp.Position.Sequence)
		if err != nil || n <= last {
			t.Fatalf("round %d: position went from %d to %q", round, last, cp.Position.Sequence)
		}
		last = n
	}
}

func saveForever(dir string) {
	f, err := OpenFile(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s, err := f.Load(context.Background(), testARN)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n := 0
	if cp, ok := s.Shards["shardId-000000000000"]; ok && cp.Position != nil {
		n, _ = strconv.Atoi(cp.Position.Sequence)
	}
	told := false
	for {
		n++
		// Pad the shards map so each save is a few kilobytes.
		for i := range 50 {
			s.Shards[fmt.Sprintf("shardId-%012d", i+1)] = Checkpoint{Start: Start{Kind: "TRIM_HORIZON"}, Position: &Position{Sequence: strconv.Itoa(n * i)}}
		}
		s.Shards["shardId-000000000000"] = Checkpoint{Start: Start{Kind: "TRIM_HORIZON"}, Position: &Position{Sequence: strconv.Itoa(n)}}
		if err := f.Save(context.Background(), s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if !told {
			fmt.Println("saved")
			told = true
		}
	}
}

// TestLockOf: a lock file is matched to a stream given by ARN exactly, and
// to one given by name in any region and account, never to a stream whose
// name only ends like it.
func TestLockOf(t *testing.T) {
	for _, c := range []struct {
		base, stream string
		want         bool
	}{
		{"us-east-1.123456789012.orders", "orders", true},
		{"eu-west-1.123456789012.orders", "orders", true},
		{"us-east-1.123456789012.orders", "arn:aws:kinesis:us-east-1:123456789012:stream/orders", true},
		{"us-east-1.123456789012.orders", "arn:aws:kinesis:us-east-1:999999999999:stream/orders", false},
		{"us-east-1.123456789012.a.orders", "orders", false},
		{"us-east-1.123456789012.a.orders", "a.orders", true},
		{"us-east-1.1234.orders", "orders", false},
	} {
		if got := lockOf(c.base, c.stream); got != c.want {
			t.Errorf("lockOf(%q, %q) = %v, want %v", c.base, c.stream, got, c.want)
		}
	}
}

// Before, a valid document followed by anything else was read as the
// document alone: the rest of a half-overwritten or concatenated file was
// ignored without a word.
func TestFileRejectsTrailingGarbage(t *testing.T) {
	dir := t.TempDir()
	f, _ := OpenFile(dir)
	defer f.Close()
	doc := `{"version":1,"stream_arn":"` + testARN + `","stream_created":"0001-01-01T00:00:00Z","shards":{}}`
	if err := os.WriteFile(f.Path(testARN), []byte(doc+"\n{\"shards\":{}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := f.Load(context.Background(), testARN)
	if err == nil || !strings.Contains(err.Error(), "after its JSON document") || !strings.Contains(err.Error(), f.Path(testARN)) {
		t.Fatalf("got %v, want an error naming the file and the bytes after its document", err)
	}
	// Trailing white space is no garbage.
	if err := os.WriteFile(f.Path(testARN), []byte(doc+"\n\n  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Load(context.Background(), testARN); err != nil {
		t.Fatal(err)
	}
}

// Before, a shard whose stored position was not a sequence number (or whose
// start time was the zero time) was handed to the reader as it was, which
// retried GetShardIterator for ever on an error naming neither the file nor
// the fix. Now the shard's checkpoint is marked broken, naming the file,
// the shard, the field, the value and the command that fixes it; the other
// shards of the file read as before.
func TestFileMarksMalformedShardBroken(t *testing.T) {
	good := `"shardId-000000000009": {"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": "49590338271490256608559692538361571095921575989136588898"}}`
	cases := []struct {
		name, shard, field, value string
	}{
		{"not a number", `{"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": "not-a-number"}}`, "position.sequence_number", `"not-a-number"`},
		{"empty", `{"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": ""}}`, "position.sequence_number", `""`},
		{"non-digits", `{"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": "4959x1"}}`, "position.sequence_number", `"4959x1"`},
		{"absurd length", `{"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": "` + strings.Repeat("9", 1000) + `"}}`, "position.sequence_number", "(1000 characters)"},
		{"negative sub-sequence", `{"start": {"kind": "TRIM_HORIZON"}, "position": {"sequence_number": "4959", "sub_sequence_number": -3}}`, "position.sub_sequence_number", "-3"},
		{"year 1", `{"start": {"kind": "AT_TIMESTAMP", "timestamp": "0001-01-01T00:00:00Z"}}`, "start.timestamp", "0001-01-01T00:00:00Z"},
		{"unknown start", `{"start": {"kind": "SOMEWHERE"}}`, "start.kind", `"SOMEWHERE"`},
		{"bad shard start", `{"start": {"kind": "TRIM_HORIZON"}, "shard_starting_sequence_number": "abc"}`, "shard_starting_sequence_number", `"abc"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f, _ := OpenFile(dir)
			defer f.Close()
			doc := `{"version":1,"stream_arn":"` + testARN + `","stream_created":"0001-01-01T00:00:00Z","shards":{` +
				`"shardId-000000000000": ` + tc.shard + `, ` + good + `}}`
			if err := os.WriteFile(f.Path(testARN), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := f.Load(context.Background(), testARN)
			if err != nil {
				t.Fatalf("a file with one malformed shard is refused whole: %v", err)
			}
			if ok := st.Shards["shardId-000000000009"]; ok.Broken != nil {
				t.Fatalf("the good shard is broken: %v", ok.Broken)
			}
			cp := st.Shards["shardId-000000000000"]
			if cp.Broken == nil {
				t.Fatalf("shard 0 %+v is not marked broken", cp)
			}
			if _, err := cp.Resume(); err == nil {
				t.Fatal("a broken checkpoint resumes")
			}
			msg := cp.Broken.Error()
			for _, want := range []string{f.Path(testARN), "shard shardId-000000000000", tc.field, tc.value, "expected", "benthos-kinesis checkpoint set --dir " + dir} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
		})
	}
}

// TestFileRefusesWhatIsNotACheckpointFile: in a checkpoint file's place, a
// symlink to /dev/zero (which never ends), a FIFO (which blocks until
// written), a directory, a file larger than MaxFileSize or a dangling
// symlink is refused at once, naming the path and what it is, never read
// whole, waited on or taken for "no checkpoint" (which would read every
// record again); Read, for checkpoint show, the same.
func TestFileRefusesWhatIsNotACheckpointFile(t *testing.T) {
	cases := map[string]struct {
		place func(t *testing.T, path string)
		want  string
	}{
		"symlink to /dev/zero": {func(t *testing.T, path string) { must(t, os.Symlink("/dev/zero", path)) }, `a symlink to "/dev/zero", a device, not a regular file`},
		"FIFO":                 {func(t *testing.T, path string) { must(t, syscall.Mkfifo(path, 0o644)) }, "is a FIFO, not a regular file"},
		"directory":            {func(t *testing.T, path string) { must(t, os.Mkdir(path, 0o755)) }, "is a directory, not a regular file"},
		"dangling symlink": {func(t *testing.T, path string) { must(t, os.Symlink(path+".gone", path)) },
			"which cannot be followed"},
		"file of 17 MiB": {func(t *testing.T, path string) {
			must(t, os.WriteFile(path, []byte(strings.Repeat(" ", MaxFileSize+1<<20)+`{"version":1}`), 0o644))
		}, fmt.Sprintf("holds %d bytes, more than a checkpoint file ever does (at most %d)", MaxFileSize+1<<20+13, MaxFileSize)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			f, err := OpenFile(dir)
			must(t, err)
			defer f.Close()
			path := f.Path(testARN)
			c.place(t, path)
			done := make(chan error, 2)
			go func() {
				_, err := f.Load(context.Background(), testARN)
				done <- err
				_, err = Read(dir, testARN)
				done <- err
			}()
			for _, call := range []string{"Load", "Read"} {
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), strconv.Quote(path)) {
						t.Fatalf("%s: got %v, want an error naming %q and saying %q", call, err, path, c.want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s did not return within 5 s", call)
				}
			}
		})
	}
}

// TestFileSavesThroughASymlink: a checkpoint file that is a symlink to a
// file elsewhere is read from its target, and a save replaces the target,
// leaving the symlink in place (before, the save replaced the symlink by a
// plain file and left the target stale).
func TestFileSavesThroughASymlink(t *testing.T) {
	ctx := context.Background()
	dir, elsewhere := t.TempDir(), t.TempDir()
	f, err := OpenFile(dir)
	must(t, err)
	defer f.Close()
	target := filepath.Join(elsewhere, "orders.json")
	must(t, os.Symlink(target, f.Path(testARN)))
	if _, err := f.Load(ctx, testARN); err == nil || !strings.Contains(err.Error(), "cannot be followed") {
		t.Fatalf("a symlink to a file not there yet loaded: %v", err)
	}
	must(t, os.WriteFile(target, nil, 0o644))
	must(t, os.Remove(target))
	s := Stream{ARN: testARN, Shards: map[string]Checkpoint{"shardId-000000000000": {Position: &Position{Sequence: "49590338271490256608559692538361571095921575989136588898"}}}}
	// A symlink whose target is gone is not replaced by a plain file.
	if err := f.Save(ctx, s); err == nil || !strings.Contains(err.Error(), "cannot be followed") {
		t.Fatalf("saved through a dangling symlink: %v", err)
	}
	must(t, os.WriteFile(target, []byte(`{"version":1,"stream_arn":"`+testARN+`"}`), 0o644))
	must(t, f.Save(ctx, s))
	if info, err := os.Lstat(f.Path(testARN)); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("after a save, the checkpoint file is no longer a symlink: %v %v", info, err)
	}
	got, err := f.Load(ctx, testARN)
	must(t, err)
	if p := got.Shards["shardId-000000000000"].Position; p == nil || p.Sequence != s.Shards["shardId-000000000000"].Position.Sequence {
		t.Fatalf("read back through the symlink: %+v", got.Shards)
	}
	data, err := os.ReadFile(target)
	must(t, err)
	if !strings.Contains(string(data), "49590338271490256608559692538361571095921575989136588898") {
		t.Fatalf("the symlink's target was not written: %s", data)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrLocked is the error of a stream file whose lock another process holds:
// a pipeline reads the stream from this directory.
var ErrLocked = errors.New("held by another process")

// fileVersion is written into every file so that a later format can tell.
const fileVersion = 1

// File is the embedded store for a single instance: one JSON file per stream
// in a directory, replaced atomically on every save (write a temporary file,
// fsync it, rename it over the old one, fsync the directory), so that a crash
// at any moment leaves the last saved state readable. Each stream file is
// locked while the store is open, so two processes cannot share one.
type File struct {
	dir string

	mu    sync.Mutex
	locks map[string]*os.File // stream file path -> its open lock file
}

// OpenFile opens (creating if needed) the directory dir as a store.
func OpenFile(dir string) (*File, error) {
	if dir == "" {
		return nil, errors.New("checkpoint directory is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint directory %q cannot be created: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %q is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return &File{dir: dir, locks: map[string]*os.File{}}, nil
}

// CheckDir reports, without creating anything, whether dir cannot serve as
// a store whatever happens next: a file in its place, or a directory this
// process cannot write to. A directory that does not exist yet is no
// error (OpenFile creates it).
func CheckDir(dir string) error {
	if dir == "" {
		return errors.New("checkpoint directory is empty")
	}
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint directory %q cannot be used: %w", dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("checkpoint directory %q is a file, not a directory: point dir at a directory (it is created if missing)", dir)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("checkpoint directory %q is not writable by this process: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// CheckLocks reports a stream of streams (names or ARNs) that another
// process reads from dir now: its lock is held. It takes each lock for an
// instant only, so that a second pipeline on the same directory stops at
// start with the reason, rather than retrying for ever; the lock taken on
// the first load remains the rule.
func CheckLocks(dir string, streams []string) error {
	return eachStreamFile(dir, ".json.lock", streams, func(path, s string) error {
		l, err := lockFile(path)
		if errors.Is(err, ErrLocked) {
			return fmt.Errorf("stream %s is read from checkpoint directory %q by another process (%w): give each instance its own directory, or share the stream through checkpoint.dynamodb", s, dir, err)
		}
		if err == nil {
			unlockFile(l)
		}
		return nil
	})
}

// CheckFiles reports a checkpoint file in dir of a stream of streams (names
// or ARNs) that cannot be read as one: not a regular file, a dangling
// symlink, a file over MaxFileSize (see readBounded). It reads none of
// them, so that a pipeline stops at start with the reason rather than
// retrying its connection for ever.
func CheckFiles(dir string, streams []string) error {
	return eachStreamFile(dir, ".json", streams, func(path, _ string) error {
		_, err := resolve(path)
		return err
	})
}

// eachStreamFile calls fn with each file of dir named for a stream of
// streams (in any region and account, see lockOf) with suffix, and the
// stream, until fn fails. A directory that cannot be read has none: CheckDir
// and OpenFile say why.
func eachStreamFile(dir, suffix string, streams []string, fn func(path, stream string) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok {
			continue
		}
		for _, s := range streams {
			if !lockOf(name, s) {
				continue
			}
			if err := fn(filepath.Join(dir, e.Name()), s); err != nil {
				return err
			}
		}
	}
	return nil
}

// lockOf reports whether the lock file base (a fileName without .json) is
// of stream s, given by ARN or by name (in any region and account).
func lockOf(base, s string) bool {
	if strings.HasPrefix(s, "arn:") {
		return base+".json" == fileName(s)
	}
	region, rest, ok := strings.Cut(base, ".")
	if !ok || region == "" {
		return false
	}
	account, stream, ok := strings.Cut(rest, ".")
	return ok && len(account) == 12 && strings.Trim(account, "0123456789") == "" && stream+".json" == fileName(s)
}

// Path returns the file that holds a stream's checkpoints.
func (f *File) Path(streamARN string) string {
	return filepath.Join(f.dir, fileName(streamARN))
}

// fileName turns a stream ARN (arn:aws:kinesis:us-east-1:123:stream/orders)
// into a file name (us-east-1.123.orders.json); anything that is not a
// portable file name character becomes '_'.
func fileName(streamARN string) string {
	name := streamARN
	if parts := strings.SplitN(streamARN, ":", 6); len(parts) == 6 {
		name = parts[3] + "." + parts[4] + "." + strings.TrimPrefix(parts[5], "stream/")
	}
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String() + ".json"
}

// Load implements Store. It takes the stream's lock on first use.
func (f *File) Load(_ context.Context, streamARN string) (Stream, error) {
	path := f.Path(streamARN)
	if err := f.lock(path); err != nil {
		return Stream{}, err
	}
	return readFile(path, streamARN)
}

// Read reads the checkpoints of a stream in the store directory dir without
// taking its lock, for a look while a pipeline may run (each save replaces
// the file whole, so a read sees one save or the one before).
func Read(dir, streamARN string) (Stream, error) {
	return readFile(filepath.Join(dir, fileName(streamARN)), streamARN)
}

func readFile(path, streamARN string) (Stream, error) {
	empty := Stream{ARN: streamARN, Shards: map[string]Checkpoint{}}
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return Stream{}, err
	}
	var doc fileDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return Stream{}, fmt.Errorf("checkpoint file %q is not a valid checkpoint file (%v): restore it, or delete it to start again from start_from", path, err)
	}
	if off := dec.InputOffset(); len(bytes.TrimSpace(data[off:])) > 0 {
		return Stream{}, fmt.Errorf("checkpoint file %q is not a valid checkpoint file (%d bytes of something else after its JSON document, at byte %d): restore it, or delete it to start again from start_from", path, len(data)-int(off), off)
	}
	if doc.Version != fileVersion {
		return Stream{}, fmt.Errorf("checkpoint file %q has format version %d, this build reads version %d", path, doc.Version, fileVersion)
	}
	if doc.ARN != streamARN {
		return Stream{}, fmt.Errorf("checkpoint file %q belongs to stream %s, not %s", path, doc.ARN, streamARN)
	}
	if doc.Shards == nil {
		doc.Shards = map[string]Checkpoint{}
	}
	for id, cp := range doc.Shards {
		if err := cp.Validate(); err != nil {
			cp.Broken = fmt.Errorf("checkpoint file %q, shard %s: %w: the shard is not read until its checkpoint is set again: %s",
				path, id, err, SetCommand(DirFlags(filepath.Dir(path)), StreamFlags(streamARN), id, false))
			doc.Shards[id] = cp
		}
	}
	return doc.Stream, nil
}

// MaxFileSize is the largest checkpoint file read: a stream of 10,000
// shards saves about 2 MiB, so anything larger is not a checkpoint file
// (a log, a disk image, a symlink to a device) and reading it whole would
// only take memory.
const MaxFileSize = 16 << 20

// readBounded reads a checkpoint file that must be a regular file of at
// most MaxFileSize, or a symlink that resolves to one: a device (such as
// /dev/zero, which never ends), a FIFO (which blocks until written to), a
// directory or a dangling symlink is refused with what it is, never read
// or counted as no checkpoint. fs.ErrNotExist only when nothing is at path.
func readBounded(path string) ([]byte, error) {
	target, err := resolve(path)
	if err != nil {
		return nil, err
	}
	// Opened without blocking, in case a FIFO took the place of the file
	// since resolve looked; checked again on the open file.
	f, err := openNonBlocking(target)
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint file %q: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint file %q: %w", path, err)
	}
	if err := checkRegular(path, target, info); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint file %q: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, tooLarge(path, int64(len(data)))
	}
	return data, nil
}

// resolve returns the file a checkpoint path stands for: the path itself,
// or the target of its symlinks, which must exist and be a regular file.
// fs.ErrNotExist only when nothing is at path.
func resolve(path string) (string, error) {
	link, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("checkpoint file %q: %w", path, err)
	}
	target := path
	if link.Mode()&fs.ModeSymlink != 0 {
		if target, err = filepath.EvalSymlinks(path); err != nil {
			dest, _ := os.Readlink(path)
			return "", fmt.Errorf("checkpoint file %q is a symlink to %q, which cannot be followed (%v): restore its target, or remove the symlink to start again from start_from", path, dest, unwrapPath(err))
		}
	}
	info, err := os.Stat(target)
	if err != nil {
		return "", fmt.Errorf("checkpoint file %q: %w", path, err)
	}
	return target, checkRegular(path, target, info)
}

// checkRegular refuses a checkpoint file that is not a regular file of at
// most MaxFileSize, naming what it is.
func checkRegular(path, target string, info fs.FileInfo) error {
	what := ""
	switch m := info.Mode(); {
	case m.IsRegular():
		if info.Size() > MaxFileSize {
			return tooLarge(path, info.Size())
		}
		return nil
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	default:
		what = "not a regular file (mode " + m.String() + ")"
	}
	if target != path {
		what = fmt.Sprintf("a symlink to %q, %s", target, what)
	}
	return fmt.Errorf("checkpoint file %q is %s, not a regular file: remove it, or put the checkpoint file there, to start", path, what)
}

func tooLarge(path string, size int64) error {
	return fmt.Errorf("checkpoint file %q holds %d bytes, more than a checkpoint file ever does (at most %d): it is something else; move it away, or restore the checkpoint file", path, size, MaxFileSize)
}

// unwrapPath drops the path an fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

type fileDoc struct {
	Version int `json:"version"`
	Stream
}

// Save implements Store.
func (f *File) Save(_ context.Context, s Stream) error {
	path := f.Path(s.ARN)
	if err := f.lock(path); err != nil {
		return err
	}
	data, err := json.MarshalIndent(fileDoc{Version: fileVersion, Stream: s}, "", "  ")
	if err != nil {
		return err
	}
	// A symlink stays one: the file it points to is replaced.
	target, err := resolve(path)
	if errors.Is(err, fs.ErrNotExist) {
		target, err = path, nil
	}
	if err != nil {
		return fmt.Errorf("saving checkpoints: %w", err)
	}
	if err := writeAtomic(target, append(data, '\n')); err != nil {
		return fmt.Errorf("saving checkpoints to %q: %w", path, err)
	}
	return nil
}

// writeAtomic replaces path with data so that a crash leaves either the old
// or the new content, never a mix.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// Close implements Store: it releases every lock.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for path, l := range f.locks {
		errs = append(errs, unlockFile(l))
		delete(f.locks, path)
	}
	return errors.Join(errs...)
}

func (f *File) lock(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.locks[path]; ok {
		return nil
	}
	l, err := lockFile(path + ".lock")
	if err != nil {
		return err
	}
	f.locks[path] = l
	return nil
}

package emulator

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// nodeProcess is one emulator process owned by one test. The test's cleanup
// kills it with its process group and waits for it.
type nodeProcess struct {
	name   string
	cmd    *exec.Cmd
	out    *tailBuffer
	report string

	exited  chan struct{} // closed once the process has been reaped
	waitErr error         // set before exited is closed
	readyBy time.Time     // when the start timeout ends

	stopOnce sync.Once
	stopErr  error

	// mu guards quiet: set once the test ends or stops the process, after
	// which an exit is expected and not reported.
	mu    sync.Mutex
	quiet bool
}

// stopTimeout bounds the wait for a killed process to be reaped.
const stopTimeout = 10 * time.Second

// nodeLaunch describes how to start one emulator.
type nodeLaunch struct {
	pkg       npmPackage
	script    string   // relative to the package folder
	args      []string // before the options' args
	env       []string // before the options' env
	portLabel int      // the port the emulator asks for; the preload maps it
	// codeCache compiles script from a V8 code cache kept under the npm
	// prefix (codecache.js): for a large script started many times.
	codeCache bool
}

// startNode starts l under the loopback preload, waits until it listens on
// the port it asks for as l.portLabel and returns the process and that
// port's real number. Failures fail t and show the process's output.
func startNode(t testing.TB, l nodeLaunch, cfg *launchConfig) (*nodeProcess, int) {
	t.Helper()
	node, dir := prepare(t, l.pkg.name)

	tmp := t.TempDir()
	args := []string{"-r", writePreload(t, tmp, "loopback.js", loopbackJS)}
	env := l.env
	if l.codeCache {
		args = append(args, "-r", writePreload(t, tmp, "codecache.js", codeCacheJS))
		env = append(slices.Clip(env), envCodeCache+"="+filepath.Join(dir, codeCacheDirRel))
	}
	p := &nodeProcess{
		name:   l.pkg.name,
		out:    newTailBuffer(defaultTail),
		report: filepath.Join(tmp, "ports"),
		exited: make(chan struct{}),
	}
	args = append(append(args, l.script), l.args...)
	p.cmd = exec.Command(node, append(args, cfg.args...)...)
	p.cmd.Dir = packageDir(dir, l.pkg.name)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Env = append(p.cmd.Env, sortedEnv(cfg.env)...)
	// Last, so that nothing above overrides them (exec keeps the last value).
	p.cmd.Env = append(p.cmd.Env,
		envReport+"="+p.report,
		envLifetimeMS+"="+strconv.FormatInt(lifetime(t, cfg).Milliseconds(), 10))
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// Wait also waits for the output pipes; do not hang on a stray holder.
	p.cmd.WaitDelay = stopTimeout / 2
	setProcessGroup(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("emulator: start %s: %v", p.name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
		p.reportExit(t)
	}()
	t.Cleanup(func() {
		p.hush()
		if err := p.stop(); err != nil {
			t.Errorf("%v", err)
		}
	})

	p.readyBy = time.Now().Add(cfg.startTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), p.readyBy)
	defer cancel()
	port, err := p.waitPort(ctx, l.portLabel)
	if err != nil {
		p.fatalf(t, "%v", err)
	}
	return p, port
}

// writePreload writes a preload script into dir and returns its path.
func writePreload(t testing.TB, dir, name string, script []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatalf("emulator: write preload %s: %v", name, err)
	}
	return path
}

// waitPort polls the preload's report until the emulator listens on the
// port it asked for as label, and returns the port it really got.
func (p *nodeProcess) waitPort(ctx context.Context, label int) (int, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if port, ok := readReport(p.report)[label]; ok {
			return port, nil
		}
		select {
		case <-p.exited:
			return 0, fmt.Errorf("emulator: %s exited before listening: %v", p.name, p.waitErr)
		case <-ctx.Done():
			return 0, fmt.Errorf("emulator: %s did not listen on its port (label %d): %w", p.name, label, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// readReport parses the "<asked> <bound>" lines the preload appends. A line
// being written is incomplete and ignored until the next read.
func readReport(path string) map[int]int {
	ports := map[int]int{}
	f, err := os.Open(path)
	if err != nil {
		return ports
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		asked, bound, ok := strings.Cut(sc.Text(), " ")
		a, errA := strconv.Atoi(asked)
		b, errB := strconv.Atoi(bound)
		if ok && errA == nil && errB == nil && b > 0 {
			ports[a] = b
		}
	}
	return ports
}

// waitReady calls probe until it succeeds, p exits or the start timeout,
// which began when p was started, ends.
func (p *nodeProcess) waitReady(t testing.TB, probe func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), p.readyBy)
	defer cancel()
	var last error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		last = probe(callCtx)
		callCancel()
		if last == nil {
			return
		}
		select {
		case <-p.exited:
			p.fatalf(t, "emulator: %s exited while starting (%v); last probe: %v", p.name, p.waitErr, last)
		case <-ctx.Done():
			p.fatalf(t, "emulator: %s not ready in time; last probe: %v", p.name, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fatalf fails t with the message and the tail of the emulator's output.
func (p *nodeProcess) fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s\n--- %s output (tail) ---\n%s", fmt.Sprintf(format, args...), p.name, p.out)
}

// reportExit logs, with the emulator's output, an exit that neither the test
// nor its end asked for: a test then fails with connection errors, and this
// says why. (Some exits are expected, e.g. at the end of a lifetime.)
func (p *nodeProcess) reportExit(t testing.TB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.quiet {
		t.Logf("emulator: %s (pid %d) exited while its test runs: %v\n--- %s output (tail) ---\n%s", p.name, p.pid(), p.waitErr, p.name, p.out)
	}
}

// hush marks later exits as expected: the test is ending or stops p.
func (p *nodeProcess) hush() {
	p.mu.Lock()
	p.quiet = true
	p.mu.Unlock()
}

// pid is the emulator's process id (and its process group id).
func (p *nodeProcess) pid() int { return p.cmd.Process.Pid }

// stop kills the emulator's process group and waits until the emulator is
// reaped. Calling it again returns the first result.
func (p *nodeProcess) stop() error {
	p.hush()
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
			return // never signal a reaped process: its id may be reused
		default:
		}
		if err := killGroup(p.pid()); err != nil {
			p.stopErr = fmt.Errorf("emulator: kill %s (pid %d): %w", p.name, p.pid(), err)
			return
		}
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			p.stopErr = fmt.Errorf("emulator: %s (pid %d) still running %v after SIGKILL", p.name, p.pid(), stopTimeout)
		}
	})
	return p.stopErr
}

// lifetime is how long the emulator may live if nobody stops it.
func lifetime(t testing.TB, cfg *launchConfig) time.Duration {
	if cfg.lifetime > 0 {
		return cfg.lifetime
	}
	if dl, ok := testDeadline(t); ok {
		if d := time.Until(dl) + time.Minute; d > time.Minute {
			return d
		}
		return time.Minute
	}
	return time.Hour
}

func sortedEnv(env map[string]string) []string {
	kv := make([]string, 0, len(env))
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return kv
}

package emulator

import (
	"strconv"
	"strings"
	"time"
)

// Option configures an emulator started by [KinesisLocal] or [Dynalite].
// Options documented for one emulator have no effect on the other.
type Option func(*launchConfig)

// launchConfig is what the options set; zero values mean the defaults below.
type launchConfig struct {
	startTimeout time.Duration
	lifetime     time.Duration
	region       string
	env          map[string]string
	args         []string
}

const (
	defaultStartTimeout = 60 * time.Second
	defaultRegion       = "us-east-1"
)

func newLaunchConfig(opts []Option) *launchConfig {
	c := &launchConfig{startTimeout: defaultStartTimeout, region: defaultRegion, env: map[string]string{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithStartTimeout bounds how long the emulator may take to answer its first
// request before the test fails (default 60 s; kinesis-local usually takes
// about 1 s but was seen taking 20 s on a heavily loaded 2-core machine). The
// first install of the npm packages is bounded separately.
func WithStartTimeout(d time.Duration) Option {
	return func(c *launchConfig) { c.startTimeout = d }
}

// WithLifetime sets how long the emulator process may live at most, even if
// the test binary never stops it (default: until one minute past the test's
// deadline from go test -timeout, or one hour without a deadline).
func WithLifetime(d time.Duration) Option {
	return func(c *launchConfig) { c.lifetime = d }
}

// WithRegion sets the region of the emulator and of its clients (default
// us-east-1). For kinesis-local it also sets the region put in ARNs.
func WithRegion(region string) Option {
	return func(c *launchConfig) {
		c.region = region
		c.env["AWS_REGION"] = region
	}
}

// WithEnv sets an environment variable of the emulator process. For
// kinesis-local this is its configuration surface, e.g.
// WithEnv("REGISTER_STREAM_CONSUMER_DURATION", "100ms") or SHARD_LIMIT.
// The port variables are set by the launcher and cannot be overridden.
func WithEnv(key, value string) Option {
	return func(c *launchConfig) { c.env[key] = value }
}

// WithStreams makes kinesis-local create streams at startup
// (INITIALIZE_STREAMS), each given as "name:shards", e.g. "orders:2".
// The streams may still be CREATING when the emulator becomes ready.
func WithStreams(specs ...string) Option {
	return WithEnv("INITIALIZE_STREAMS", strings.Join(specs, ","))
}

// WithLogLevel sets kinesis-local's LOG_LEVEL (ERROR, WARN, INFO, DEBUG,
// TRACE; default WARN). The output is shown when the emulator fails to start.
func WithLogLevel(level string) Option {
	return WithEnv("LOG_LEVEL", level)
}

// WithTableDelay sets how long dynalite keeps a table CREATING, UPDATING or
// DELETING (dynalite's default: 500 ms). Use 0 to make changes immediate.
func WithTableDelay(d time.Duration) Option {
	ms := strconv.FormatInt(d.Milliseconds(), 10)
	return func(c *launchConfig) {
		c.args = append(c.args, "--createTableMs", ms, "--updateTableMs", ms, "--deleteTableMs", ms)
	}
}

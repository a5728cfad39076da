package leasecoord

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// The instances of one group share a stream's shards: they must run one
// pipeline. Each publishes a digest of each part of its config with its
// heartbeat (Options.Config); every cycle, each compares those of the live
// instances with its own, sets kinesis_group_config_mismatch to the number
// that differ, and says so when that set changes.

// buildPart is the part of a digest that names the build that made it. It
// is not compared: a pipeline is the same across a rolling upgrade, and a
// copied config deployed later from a newer image is still a copy. It is
// said, as a part that filled in defaults of another version may differ
// by them.
const buildPart = "build"

// configMismatch is what differs from this instance's config.
type configMismatch struct {
	instances   []string // the live instances whose config differs, sorted
	parts       []string // the parts that differ in any of them, sorted
	otherBuilds []string // those of them of another build, sorted
}

func (m configMismatch) String() string {
	return strings.Join(m.instances, ", ") + ": " + strings.Join(m.parts, ", ")
}

// mismatched compares the configs of the live workers other than me with
// mine. Workers that published none are left out.
func mismatched(mine map[string]string, me string, workers []lease.Worker, live map[string]bool) configMismatch {
	var out configMismatch
	if mine == nil {
		return out
	}
	parts := map[string]bool{}
	for _, w := range workers {
		if w.ID == me || !live[w.ID] || w.Config == nil {
			continue
		}
		differs := false
		for p := range union(mine, w.Config) {
			if p != buildPart && mine[p] != w.Config[p] {
				parts[p], differs = true, true
			}
		}
		if differs {
			out.instances = append(out.instances, w.ID)
			if w.Config[buildPart] != mine[buildPart] {
				out.otherBuilds = append(out.otherBuilds, w.ID)
			}
		}
	}
	slices.Sort(out.otherBuilds)
	slices.Sort(out.instances)
	out.parts = slices.Sorted(maps.Keys(parts))
	return out
}

func union(a, b map[string]string) map[string]string {
	u := maps.Clone(a)
	maps.Copy(u, b)
	return u
}

// checkConfigs reports the live instances of the group that run another
// config than this one: the gauge every cycle (left unset by an instance
// that has no digest to compare), a warning when the set changes, and a
// note when it empties.
func (c *leaseCoordinator) checkConfigs(workers []lease.Worker, live map[string]bool) {
	if c.config == nil {
		return
	}
	m := mismatched(c.config, c.me, workers, live)
	c.st.Metrics.ConfigMismatch.Set(int64(len(m.instances)), c.st.Name)
	report := ""
	if len(m.instances) > 0 {
		report = m.String()
	}
	if report == c.configReport {
		return
	}
	c.configReport = report
	if report == "" {
		c.st.Log.Infof("stream %s: no live instance of %s runs another pipeline config than this instance's now", c.st.Name, c.where())
		return
	}
	builds := ""
	if len(m.otherBuilds) > 0 {
		builds = fmt.Sprintf(" (%s of another build of benthos-kinesis, whose defaults may differ)", strings.Join(m.otherBuilds, ", "))
	}
	c.st.Log.Warnf("stream %s: instances %s of %s run a pipeline config other than this instance's (%s): their %s differs%s. The instances of one group share the stream's shards, so each of two pipelines sees only part of the stream's records: give each pipeline its own checkpoint.dynamodb.group, or run one config in the group",
		c.st.Name, strings.Join(m.instances, ", "), c.where(), c.me, strings.Join(m.parts, ", "), builds)
}

// where names the table and the group, for messages.
func (c *leaseCoordinator) where() string {
	if c.group == "" {
		return "lease table " + c.table.Name() + " (no group)"
	}
	return "lease table " + c.table.Name() + " group " + c.group
}

package input

import (
	"fmt"
	"sort"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// movedFields are the fields of Redpanda Connect's and Bento's aws_kinesis
// input, and KCL's configuration names, that this input names otherwise (or
// has no use for): a config carried over says where each went instead of
// "field not recognised". Fields of the same name and meaning (streams,
// region, endpoint, credentials, batching, auto_replay_nacks) need nothing.
var movedFields = map[string]string{
	"checkpoint_limit":  "checkpoint.limit",
	"commit_period":     "checkpoint.commit_period",
	"dynamodb":          "checkpoint.dynamodb (table, create, endpoint; the table is created with on-demand billing)",
	"lease_period":      "checkpoint.dynamodb.lease_period",
	"rebalance_period":  "no field: leases are balanced every third of checkpoint.dynamodb.lease_period",
	"start_from_oldest": "start_from: trim_horizon (start_from_oldest: true) or latest (false); the default here is latest",
	"enhanced_fan_out":  "reader: efo (the default here) with efo.consumer_name, or efo.registration: none with efo.consumer_arns",
	// KCL's names, as people write them in YAML.
	"application_name":           "efo.consumer_name (KCL's application name), and checkpoint.dynamodb.table for its lease table",
	"initial_position_in_stream": "start_from (KCL's initialPositionInStream: TRIM_HORIZON, LATEST, AT_TIMESTAMP)",
	"failover_time_millis":       "checkpoint.dynamodb.lease_period, a duration such as 10s (KCL's failoverTimeMillis)",
	"table_name":                 "checkpoint.dynamodb.table (KCL's tableName)",
	"worker_identifier":          "checkpoint.dynamodb.instance_id (KCL's workerIdentifier)",
}

// movedFieldSpecs declare the moved fields, so that lint and parsing can
// name where each went; they are deprecated and do nothing.
func movedFieldSpecs() []*service.ConfigField {
	var fields []*service.ConfigField
	for _, name := range movedNames() {
		fields = append(fields, service.NewAnyField(name).
			Description("Not used: a field of aws_kinesis or a KCL setting. Here: "+movedFields[name]+".").
			Optional().
			Deprecated())
	}
	return fields
}

func movedNames() []string {
	names := make([]string, 0, len(movedFields))
	for n := range movedFields {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// movedLint is the Bloblang of the lint rule's first arm: every moved field
// present, each with where it went.
func movedLint() (lets, arm string) {
	var pairs []string
	for _, n := range movedNames() {
		pairs = append(pairs, fmt.Sprintf("%q: %q", n, movedFields[n]))
	}
	lets = "let moved = {" + strings.Join(pairs, ", ") + "}\n" +
		"let found = $moved.keys().filter(k -> this.exists(k)).sort()\n"
	arm = `  $found.length() > 0 => $found.map_each(k -> "field %v: is a field of aws_kinesis or a KCL setting; here: %v".format(k, $moved.get(k))),` + "\n"
	return lets, arm
}

// checkMoved fails a config that sets a moved field, naming its new place.
func checkMoved(pc *service.ParsedConfig) error {
	var errs []string
	for _, n := range movedNames() {
		if pc.Contains(n) {
			errs = append(errs, fmt.Sprintf("field %s: is a field of aws_kinesis or a KCL setting; here: %s", n, movedFields[n]))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

package checkpoint

import (
	"fmt"
	"strings"
)

// SetCommand says how to set a shard's checkpoint again with the checkpoint
// command, for messages about a checkpoint that cannot be read from: flags
// point the command at the store (DirFlags, TableFlags), stream at the
// stream (StreamFlags), and force is for a lease table, whose instances may
// run meanwhile (a local store is locked by its pipeline, which must stop
// first).
func SetCommand(flags, stream, shardID string, force bool) string {
	cmd := fmt.Sprintf("benthos-kinesis checkpoint set %s %s --shard %s", flags, stream, ShellQuote(shardID))
	if force {
		return "`" + cmd + " --force` with one of --to-trim-horizon, --to-timestamp T or --after-sequence N (a sequence number of the shard: `checkpoint show` lists them); with --force it may run while instances do"
	}
	return "stop the pipeline and run `" + cmd + "` with one of --to-trim-horizon, --to-timestamp T or --after-sequence N (a sequence number of the shard: `checkpoint show` lists them)"
}

// StreamFlags points the checkpoint command at a stream: its name or ARN
// (an ARN names its account and region), then flag and value pairs of how
// to reach it; pairs with an empty value are left out.
func StreamFlags(stream string, reach ...string) string {
	return "--stream " + ShellQuote(stream) + Flags(reach...)
}

// Flags are flag and value pairs for a command line, each pair with a
// leading space; pairs with an empty value are left out.
func Flags(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			b.WriteString(" " + pairs[i] + " " + ShellQuote(pairs[i+1]))
		}
	}
	return b.String()
}

// DirFlags points the checkpoint command at a local store's directory.
func DirFlags(dir string) string { return "--dir " + ShellQuote(dir) }

// TableFlags points the checkpoint command at a lease table.
func TableFlags(table, group string) string {
	if group != "" {
		return "--table " + ShellQuote(table) + " --group " + ShellQuote(group)
	}
	return "--table " + ShellQuote(table)
}

// ShellQuote quotes s for a command line a user copies, when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:=,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

package checkpoint

import (
	"fmt"
	"strings"
)

// SetCommand says how to set a shard's checkpoint again with the checkpoint
// command, for messages about a checkpoint that cannot be read from: flags
// point the command at the store (DirFlags, TableFlags), and force is for a
// lease table, whose instances may run meanwhile (a local store is locked
// by its pipeline, which must stop first).
func SetCommand(flags, stream, shardID string, force bool) string {
	cmd := fmt.Sprintf("benthos-kinesis checkpoint set %s --stream %s --shard %s", flags, ShellQuote(stream), ShellQuote(shardID))
	if force {
		return "`" + cmd + " --force` with one of --to-trim-horizon, --to-timestamp T or --after-sequence N (a sequence number of the shard: `checkpoint show` lists them); with --force it may run while instances do"
	}
	return "stop the pipeline and run `" + cmd + "` with one of --to-trim-horizon, --to-timestamp T or --after-sequence N (a sequence number of the shard: `checkpoint show` lists them)"
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

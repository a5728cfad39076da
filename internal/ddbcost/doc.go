// Package ddbcost counts what DynamoDB charges for a request: the size of an
// item as DynamoDB measures it, the read and write units a request of that
// size consumes, and what a rate of units costs a month on demand.
//
// It exists so that the lease table's cost is computed from the items the
// input writes and the calls it makes, not guessed: the benchmarks and the
// bench command count calls and units through a proxy and price them here,
// and the emulator's proxy sizes the items of the writes dynalite does not
// report (a failed conditional write). It imports nothing of the module.
package ddbcost

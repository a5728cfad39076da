// Package kpl reads and writes the aggregated record format of the Kinesis
// Producer Library (KPL), in which many small user records travel inside one
// Kinesis record.
//
// # Format
//
// An aggregated record's data is the four magic bytes F3 89 9A C2, then a
// protocol buffer message (AggregatedRecord), then the 16-byte MD5 digest of
// that message's bytes. The message holds a table of partition keys, a table
// of explicit hash keys, and the user records; each user record names its keys
// by index into the tables and carries its data and optional tags. A user
// record's sub-sequence number is its position in the list of records.
//
// Data that does not begin with the magic bytes, or is too short to hold them
// and a digest, is a plain record and is delivered as it is.
// An aggregate that holds no user records is valid and delivers nothing.
//
// # What this package offers
//
//   - Unpack and Unpacker split an aggregated record into UserRecords whose
//     Data aliases the input, and report corrupt input as *CorruptError.
//     Unpacker.Open checks an aggregate whole and indexes it (16 bytes per
//     user record), for a reader that decodes its user records a part at a
//     time: one Kinesis record of 1 MiB can hold 170,000 empty user records.
//   - HashKey, PartitionHashKey, ParseHashKey and HashKeyRange map user records
//     to the 128-bit hash key space of shards without big-integer arithmetic.
//   - Pack and Builder produce aggregated records, for tests and producers.
//
// The package is a leaf: it imports only the standard library. Its protocol
// buffer encoding is written by hand for the three messages above.
package kpl

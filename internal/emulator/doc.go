// Package emulator starts third-party AWS emulators for integration tests and
// puts a small protocol-fixing proxy in front of them. It is test support:
// tests, cmd/install-emulators and the bench's -fleet mode import it, and
// nothing in it is on the product path.
//
// Two emulators are supported, both npm packages run with Node.js:
//
//   - kinesis-local (the npm build of kinesis-mock), started by [KinesisLocal];
//   - dynalite, started by [Dynalite].
//
// Each call starts a private emulator process for one test: it listens on an
// ephemeral 127.0.0.1 port only, it is killed (with its process group) when the
// test ends, and it also ends by itself when the test binary dies or after a
// bounded lifetime, so a crashed test run leaves nothing behind.
//
// The npm packages are installed once per checkout into [Dir] (by default
// <module root>/.cache/emulators, overridable with BENTHOS_KINESIS_EMULATORS_DIR)
// on first use, under a file lock so that test binaries running in parallel
// install them only once. CI can install them ahead of the tests with
//
//	go run ./cmd/install-emulators
//
// A machine without Node.js fails these tests with a message saying what to
// install: integration tests are never skipped silently. A developer who wants
// to skip them sets BENTHOS_KINESIS_SKIP_EMULATORS=1.
//
// kinesis-mock does not speak SubscribeToShard the way aws-sdk-go-v2 expects;
// [EFOProxy] bridges the difference so that tests can read through Enhanced
// Fan-Out with the real SDK client.
package emulator

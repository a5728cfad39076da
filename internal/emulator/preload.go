package emulator

import _ "embed"

// loopbackJS is the node -r preload that binds an emulator to loopback,
// reports its ports and bounds its life; see the comment at its top.
//
//go:embed loopback.js
var loopbackJS []byte

// Environment variables the preload reads.
const (
	envReport     = "BENTHOS_KINESIS_EMULATOR_REPORT"
	envLifetimeMS = "BENTHOS_KINESIS_EMULATOR_LIFETIME_MS"
)

package emulator

import _ "embed"

// loopbackJS is the node -r preload that binds an emulator to loopback,
// reports its ports and bounds its life; see the comment at its top.
//
//go:embed loopback.js
var loopbackJS []byte

// codeCacheJS is the node -r preload that compiles an emulator's entry script
// from a V8 code cache saved by an earlier start; see the comment at its top.
//
//go:embed codecache.js
var codeCacheJS []byte

// codeCacheDirRel is where the code caches go, under the npm prefix.
const codeCacheDirRel = "code-cache"

// Environment variables the preload reads.
const (
	envReport     = "BENTHOS_KINESIS_EMULATOR_REPORT"
	envLifetimeMS = "BENTHOS_KINESIS_EMULATOR_LIFETIME_MS"
	envCodeCache  = "BENTHOS_KINESIS_EMULATOR_CODE_CACHE"
)

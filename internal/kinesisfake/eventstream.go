package kinesisfake

import (
	"encoding/binary"
	"hash/crc32"
	"strconv"
)

// Event stream frames (application/vnd.amazon.eventstream), written in place
// so that a large event is built in one buffer without copies:
//
//	total length (4) | headers length (4) | prelude CRC32 (4) |
//	headers | payload | message CRC32 (4)
//
// Each header is name length (1), name, type 7 (string), value length (2),
// value. Both CRCs are IEEE CRC32; the message CRC covers everything before it.

const (
	preludeLen       = 12
	headerTypeString = 7
)

// beginFrame appends a frame prelude and the string headers (name, value
// pairs) to b, which must be empty. Append the payload, then call endFrame.
func beginFrame(b []byte, headers ...string) []byte {
	b = append(b, make([]byte, preludeLen)...)
	for i := 0; i+1 < len(headers); i += 2 {
		name, value := headers[i], headers[i+1]
		b = append(b, byte(len(name)))
		b = append(b, name...)
		b = append(b, headerTypeString)
		b = binary.BigEndian.AppendUint16(b, uint16(len(value)))
		b = append(b, value...)
	}
	binary.BigEndian.PutUint32(b[4:8], uint32(len(b)-preludeLen))
	return b
}

// endFrame completes a frame started with beginFrame.
func endFrame(b []byte) []byte {
	binary.BigEndian.PutUint32(b[0:4], uint32(len(b)+4))
	binary.BigEndian.PutUint32(b[8:12], crc32.ChecksumIEEE(b[0:8]))
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// Header values for the frames of SubscribeToShard.
const (
	hdrMessageType   = ":message-type"
	hdrEventType     = ":event-type"
	hdrContentType   = ":content-type"
	hdrExceptionType = ":exception-type"
)

func initialResponseFrame() []byte {
	b := beginFrame(nil, hdrEventType, "initial-response", hdrContentType, "application/json", hdrMessageType, "event")
	b = append(b, "{}"...)
	return endFrame(b)
}

func exceptionFrame(code, msg string) []byte {
	b := beginFrame(nil, hdrExceptionType, code, hdrContentType, "application/json", hdrMessageType, "exception")
	b = append(b, `{"message":`...)
	b = appendJSONString(b, msg)
	b = append(b, '}')
	return endFrame(b)
}

// appendEventFrame appends a SubscribeToShardEvent frame for res to b (empty).
func appendEventFrame(b []byte, res *readResult) []byte {
	b = beginFrame(b, hdrEventType, "SubscribeToShardEvent", hdrContentType, "application/json", hdrMessageType, "event")
	b = append(b, `{"Records":`...)
	b = appendRecords(b, res.records)
	b = append(b, `,"ContinuationSequenceNumber":`...)
	if res.atEnd {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, res.cont...)
		b = append(b, '"')
	}
	b = append(b, `,"MillisBehindLatest":`...)
	b = strconv.AppendInt(b, res.millis, 10)
	if res.atEnd {
		b = append(b, `,"ChildShards":`...)
		b = appendChildShards(b, res.children)
	}
	b = append(b, '}')
	return endFrame(b)
}

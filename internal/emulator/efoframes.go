package emulator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"
)

// Frame size bounds: a prelude (12 bytes) plus the message CRC (4 bytes) at
// least; at most the 16 MiB payload and 128 KiB headers the format allows.
const (
	minFrameLen = 16
	maxFrameLen = 16<<20 + 128<<10 + minFrameLen
)

// readFrame reads one whole eventstream frame from r and returns its bytes
// as they were sent. It returns io.EOF when r ends between frames and
// io.ErrUnexpectedEOF when it ends inside one.
func readFrame(r io.Reader) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(prefix[:])
	if n < minFrameLen || n > maxFrameLen {
		return nil, fmt.Errorf("eventstream frame of %d bytes is out of bounds", n)
	}
	frame := make([]byte, n)
	copy(frame, prefix[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

// initialResponseFrame is the first frame AWS sends on a SubscribeToShard
// stream and aws-sdk-go-v2 requires: an event of type initial-response with
// the (empty) operation output as a JSON payload.
func initialResponseFrame() []byte {
	var msg eventstream.Message
	msg.Headers.Set(eventstreamapi.MessageTypeHeader, eventstream.StringValue(eventstreamapi.EventMessageType))
	msg.Headers.Set(eventstreamapi.EventTypeHeader, eventstream.StringValue("initial-response"))
	msg.Headers.Set(eventstreamapi.ContentTypeHeader, eventstream.StringValue("application/json"))
	msg.Payload = []byte("{}")
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
		panic("emulator: encode initial-response frame: " + err.Error()) // static input
	}
	return buf.Bytes()
}

// frameError is an error carried by a frame: an exception (a modelled error
// such as ResourceInUseException) or a protocol error message.
type frameError struct {
	Type    string
	Message string
}

// errorOf decodes frame and returns the error it carries, or nil for an
// event frame.
func errorOf(frame []byte) (*frameError, error) {
	msg, err := eventstream.NewDecoder().Decode(bytes.NewReader(frame), nil)
	if err != nil {
		return nil, fmt.Errorf("decode eventstream frame: %w", err)
	}
	header := func(name string) string {
		if v := msg.Headers.Get(name); v != nil {
			return v.String()
		}
		return ""
	}
	switch header(eventstreamapi.MessageTypeHeader) {
	case eventstreamapi.ExceptionMessageType:
		fe := &frameError{Type: header(eventstreamapi.ExceptionTypeHeader), Message: payloadMessage(msg.Payload)}
		if fe.Type == "" {
			fe.Type = "InternalFailureException"
		}
		return fe, nil
	case eventstreamapi.ErrorMessageType:
		fe := &frameError{Type: header(eventstreamapi.ErrorCodeHeader), Message: header(eventstreamapi.ErrorMessageHeader)}
		if fe.Type == "" {
			fe.Type = "InternalFailureException"
		}
		return fe, nil
	default:
		return nil, nil
	}
}

// payloadMessage extracts the message of a JSON exception payload, falling
// back to the payload text.
func payloadMessage(payload []byte) string {
	var body struct {
		Message      string `json:"message"`
		MessageUpper string `json:"Message"`
	}
	if json.Unmarshal(payload, &body) == nil {
		if body.Message != "" {
			return body.Message
		}
		if body.MessageUpper != "" {
			return body.MessageUpper
		}
	}
	return strings.TrimSpace(string(payload))
}

// httpStatus is the status AWS answers this error type with.
func (e *frameError) httpStatus() int {
	switch e.Type {
	case "InternalFailureException":
		return 500
	default:
		return 400
	}
}

// jsonBody is the error as an AWS JSON 1.1 error response body.
func (e *frameError) jsonBody() []byte {
	b, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{e.Type, e.Message})
	return b
}

package kinesisfake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The wire protocol is AWS JSON 1.1: POST /, X-Amz-Target names the operation,
// JSON bodies with base64 blobs and epoch-second timestamps. Errors carry the
// code in X-Amzn-ErrorType and in the body's __type.

const (
	targetPrefix   = "Kinesis_20131202."
	jsonType       = "application/x-amz-json-1.1"
	eventStreamTyp = "application/vnd.amazon.eventstream"
	maxRequestBody = 16 << 20
)

// call is one request being served.
type call struct {
	op     string
	body   []byte
	header http.Header
	ctx    context.Context
	proto  string
	http1  bool
}

// decode parses the request body into v.
func (c *call) decode(v any) *apiError {
	if len(c.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		return errf(codeSerialization, "Malformed request body for %s: %v", c.op, err)
	}
	return nil
}

// rawJSON is a response body that is already encoded.
type rawJSON []byte

type opFunc func(s *Server, c *call) (any, error)

// ops maps operation names to their handlers; each lives in its own file.
// SubscribeToShard streams its answer and is served apart.
var ops map[string]opFunc

func init() {
	ops = map[string]opFunc{
		"CreateStream":                           (*Server).createStream,
		"DeleteStream":                           (*Server).deleteStream,
		"DescribeStream":                         (*Server).describeStream,
		"DescribeStreamSummary":                  (*Server).describeStreamSummary,
		"ListStreams":                            (*Server).listStreams,
		"ListShards":                             (*Server).listShards,
		"PutRecord":                              (*Server).putRecord,
		"PutRecords":                             (*Server).putRecords,
		"GetShardIterator":                       (*Server).getShardIterator,
		"GetRecords":                             (*Server).getRecords,
		"SplitShard":                             (*Server).splitShard,
		"MergeShards":                            (*Server).mergeShards,
		"UpdateShardCount":                       (*Server).updateShardCount,
		"UpdateMaxRecordSize":                    (*Server).updateMaxRecordSize,
		"UpdateStreamRecordDistributionStrategy": (*Server).updateStreamRecordDistributionStrategy,
		"RegisterStreamConsumer":                 (*Server).registerStreamConsumer,
		"DescribeStreamConsumer":                 (*Server).describeStreamConsumer,
		"ListStreamConsumers":                    (*Server).listStreamConsumers,
		"DeregisterStreamConsumer":               (*Server).deregisterStreamConsumer,
		"DescribeAccountSettings":                (*Server).describeAccountSettings,
	}
}

const opSubscribeToShard = "SubscribeToShard"

var requestIDs atomic.Uint64

func requestID() string {
	n := requestIDs.Add(1)
	return "kf-" + strconv.FormatUint(n, 16) + "-" + strconv.FormatInt(time.Now().UnixNano()&0xffffffff, 16)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		writeError(w, errf(CodeServiceUnavailable, "The server is shutting down."))
		return
	}
	defer s.handlers.Done()
	start := time.Now()
	w.Header().Set("x-amzn-RequestId", requestID())

	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, targetPrefix)
	if r.Method != http.MethodPost || !ok || op == "" {
		writeError(w, errf(codeUnknownOperation, "Unknown operation %q.", target))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return // the client went away
	}
	if len(body) > maxRequestBody {
		writeError(w, errf(CodeValidation, "Request body larger than %d bytes.", maxRequestBody))
		return
	}
	s.stats.call(op)
	if f := s.cfg.onRequest; f != nil {
		f(op, r.Header)
	}
	c := &call{op: op, body: body, header: r.Header, ctx: r.Context(), proto: r.Proto, http1: r.ProtoMajor == 1}
	if s.cfg.otherAccount {
		if aerr := s.byARNOnly(c); aerr != nil {
			s.stats.withoutARN(op)
			writeError(w, aerr)
			return
		}
	}

	if s.injectFaults(w, c) {
		s.log.Info("kinesisfake: fault injected", "op", op, "proto", r.Proto)
		return
	}

	if op == opSubscribeToShard {
		s.subscribeToShard(w, c)
		s.log.Debug("kinesisfake: call", "op", op, "proto", r.Proto, "dur", time.Since(start))
		return
	}
	fn, ok := ops[op]
	if !ok {
		writeError(w, errf(codeUnknownOperation, "Operation %s is not supported by kinesisfake.", op))
		return
	}
	out, err := fn(s, c)
	if err != nil {
		s.answerError(w, op, err)
		s.log.Debug("kinesisfake: call", "op", op, "proto", r.Proto, "err", err, "dur", time.Since(start))
		return
	}
	writeJSON(w, c, out)
	s.log.Debug("kinesisfake: call", "op", op, "proto", r.Proto, "dur", time.Since(start))
}

// answerError writes err and counts it when it is a throttle.
func (s *Server) answerError(w http.ResponseWriter, op string, err error) {
	var aerr *apiError
	if !errors.As(err, &aerr) {
		aerr = errf(CodeInternalFailure, "%v", err)
	}
	if isThrottle(aerr.code) {
		s.stats.throttle(op, 1)
	}
	writeError(w, aerr)
}

func writeError(w http.ResponseWriter, e *apiError) {
	body, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{e.code, e.msg})
	h := w.Header()
	h.Set("Content-Type", jsonType)
	h.Set("X-Amzn-ErrorType", e.code)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(statusFor(e.code))
	_, _ = w.Write(body)
}

// http1Grace is how long an HTTP/1.1 answer larger than the client's read
// buffer waits before it is written, unless the client is HTTPClient's (it
// says so in shieldHeader). It works around a race in other clients, such as
// the SDK's default one: the Go transport reads the request body once more
// after sending it, and if the SDK has already closed it because the answer
// came back, the transport closes the connection under the answer still being
// read (see bodyShield). The pause lets that last read happen first; answers
// that fit in the client's buffer are read in full anyway. It makes the
// failure rare, not impossible: give the SDK HTTPClient, or use TLS.
const (
	http1Grace     = time.Millisecond
	clientBufBytes = 4 << 10
	shieldHeader   = "X-Kinesisfake-Client"
)

func (c *call) grace(size int) {
	if c.http1 && size > clientBufBytes && c.header.Get(shieldHeader) == "" {
		time.Sleep(http1Grace)
	}
}

func writeJSON(w http.ResponseWriter, c *call, v any) {
	var body []byte
	switch b := v.(type) {
	case rawJSON:
		body = b
	case nil:
		body = []byte("{}")
	default:
		var err error
		if body, err = json.Marshal(v); err != nil {
			writeError(w, errf(CodeInternalFailure, "encode response: %v", err))
			return
		}
	}
	c.grace(len(body))
	h := w.Header()
	h.Set("Content-Type", jsonType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

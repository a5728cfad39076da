package emulator

import (
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DynamoDBProxy is an HTTP proxy on 127.0.0.1 in front of a DynamoDB
// emulator that counts the calls and the capacity units they consumed, by
// operation and by the class of item they touch (Classify), answers chosen
// operations with throttling errors for a while, and can stop answering at
// all for a while: what a test needs to measure a lease table's cost and to
// check that throttling or an outage loses nothing.
type DynamoDBProxy struct {
	// Endpoint is the proxy's base URL; point clients' endpoint at it.
	Endpoint string

	direct *dynamodb.Client // the emulator, bypassing the proxy

	mu         sync.Mutex
	calls      map[string]int64
	units      map[string]float64
	classCalls map[string]int64   // "op/class"
	classUnits map[string]float64 // "op/class"
	classify   func(op string, body []byte) string
	keys       map[string][]string  // table -> its key attributes
	throttle   map[string]time.Time // operation -> throttled until
	// throttleClass: class of item (see Classify) -> throttled until
	throttleClass map[string]time.Time
	down          time.Time // no call is answered until then
	signers       Signatures
}

// NewDynamoDBProxy starts a proxy for t in front of d; it stops when t ends.
func NewDynamoDBProxy(t testing.TB, d *DynamoDB) *DynamoDBProxy {
	t.Helper()
	u, err := url.Parse(d.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &DynamoDBProxy{
		Endpoint:      "http://" + ln.Addr().String(),
		direct:        d.Client(),
		calls:         map[string]int64{},
		units:         map[string]float64{},
		classCalls:    map[string]int64{},
		classUnits:    map[string]float64{},
		keys:          map[string][]string{},
		throttle:      map[string]time.Time{},
		throttleClass: map[string]time.Time{},
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = p.count
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = p.receive(r)
		op := operation(r)
		class := r.Context().Value(requestInfoKey{}).(*requestInfo).class
		p.mu.Lock()
		until, throttled := p.throttle[op]
		if u, ok := p.throttleClass[class]; ok && class != "" && u.After(until) {
			until, throttled = u, true
		}
		down := p.down
		p.mu.Unlock()
		if time.Now().Before(down) {
			drop(w)
			return
		}
		if throttled && time.Now().Before(until) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("X-Amzn-ErrorType", "ProvisionedThroughputExceededException")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded (injected by the test proxy)"}`)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// operation is the DynamoDB operation of a request, from its X-Amz-Target
// (DynamoDB_20120810.UpdateItem).
func operation(r *http.Request) string {
	target := r.Header.Get("X-Amz-Target")
	return target[strings.LastIndexByte(target, '.')+1:]
}

// Calls returns the calls so far by operation, and the capacity units they
// consumed as the emulator reported them (for operations asked to return
// them), with those of conditional writes whose condition failed, which it
// does not report (see count).
func (p *DynamoDBProxy) Calls() (calls map[string]int64, units map[string]float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls), maps.Clone(p.units)
}

// Signers returns the calls so far by who signed them and for which region
// and service (SigV4Scope).
func (p *DynamoDBProxy) Signers() map[string]int64 { return p.signers.Counts() }

// Signatures counts requests by who signed them and for which region and
// service (SigV4Scope), or by any other key given to Count. The zero value
// is ready; it is safe for concurrent use.
type Signatures struct {
	mu sync.Mutex
	n  map[string]int64
}

// Add counts a request by its headers' signature.
func (s *Signatures) Add(h http.Header) { s.Count(SigV4Scope(h)) }

// Count counts one of key.
func (s *Signatures) Count(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int64{}
	}
	s.n[key]++
}

// Counts returns the counts so far.
func (s *Signatures) Counts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n)
}

// SigV4Scope is who signed a request, and for what: the access key id,
// region and service of its AWS Signature Version 4 credential scope, as
// "AKID region service"; "unsigned" without one.
func SigV4Scope(h http.Header) string {
	_, cred, ok := strings.Cut(h.Get("Authorization"), "Credential=")
	if !ok {
		return "unsigned"
	}
	cred, _, _ = strings.Cut(cred, ",")
	// AKID/20240501/us-east-1/kinesis/aws4_request
	parts := strings.Split(cred, "/")
	if len(parts) != 5 {
		return "malformed " + cred
	}
	return parts[0] + " " + parts[2] + " " + parts[3]
}

// drop resets the connection of a request without answering it.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // closes the connection unanswered too
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // a reset, not an orderly close
	}
	conn.Close()
}

// Throttle answers every call of the operations with
// ProvisionedThroughputExceededException for d from now.
func (p *DynamoDBProxy) Throttle(d time.Duration, ops ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, op := range ops {
		p.throttle[op] = time.Now().Add(d)
	}
}

// ThrottleClass answers every call on an item of class (see Classify) with
// ProvisionedThroughputExceededException for d from now (d <= 0: no
// more): one hot item throttled, the rest of the table served.
func (p *DynamoDBProxy) ThrottleClass(d time.Duration, class string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttleClass[class] = time.Now().Add(d)
}

// Unreachable answers no call at all for d from now: the proxy resets the
// connection of every request it receives without a response, so clients
// see a network error (connection reset), not an AWS error, as when the
// table's endpoint is out of reach. Calls are still counted.
func (p *DynamoDBProxy) Unreachable(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = time.Now().Add(d)
}

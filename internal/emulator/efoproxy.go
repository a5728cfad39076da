package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// subscribeToShardTarget is the X-Amz-Target of SubscribeToShard in the AWS
// JSON 1.1 protocol Kinesis uses.
const subscribeToShardTarget = "Kinesis_20131202.SubscribeToShard"

// proxyCloseTimeout bounds how long closing the proxy waits for in-flight
// requests after cancelling them.
const proxyCloseTimeout = 10 * time.Second

// EFOProxy starts, for t, an HTTP proxy on 127.0.0.1 in front of the
// kinesis-local at upstream (e.g. [Kinesis.Endpoint]) and returns its base
// URL. Pointing a kinesis client's BaseEndpoint at it makes aws-sdk-go-v2's
// SubscribeToShard work against kinesis-local, which differs from AWS in two
// ways the proxy bridges, for SubscribeToShard only:
//
//   - kinesis-local sends no initial-response event; the proxy inserts it
//     before the first upstream frame;
//   - kinesis-local reports errors (e.g. ResourceInUseException) as an
//     exception frame inside an HTTP 200; when the first frame is one, the
//     proxy answers with the AWS JSON 1.1 error response instead (HTTP 400, or
//     500 for InternalFailureException, X-Amzn-ErrorType and a JSON body), so
//     the SDK returns the modelled error type.
//
// After the first frame the stream is copied frame by frame, unchanged, and
// flushed after each frame. An upstream that breaks mid-stream breaks the
// client's stream too (aws-sdk-go-v2 reports that as an error over HTTP/2,
// but ends the stream with a nil Err over HTTP/1.1), and a client that goes
// away cancels the upstream request. Every other request passes through
// unchanged and streamed.
//
// Clients may speak HTTP/1.1 or HTTP/2 without TLS (prior knowledge); the
// proxy talks HTTP/1.1 to upstream. The proxy stops when t ends, cutting
// what is still in flight.
func EFOProxy(t testing.TB, upstream string) string {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		t.Fatalf("emulator: EFOProxy upstream %q is not an http(s) base URL (err: %v)", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("emulator: EFOProxy listen: %v", err)
	}
	p := newEFOProxy(u)
	// HTTP/1.1 and prior-knowledge HTTP/2 without TLS (h2c): AWS serves
	// SubscribeToShard over HTTP/2, so clients built for it work here too.
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Protocols:         protocols,
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return p.ctx },
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	t.Cleanup(func() {
		if err := p.close(srv); err != nil {
			t.Error(err)
		}
		<-served
	})
	return "http://" + ln.Addr().String()
}

// efoProxy is the handler behind EFOProxy.
type efoProxy struct {
	upstream    *url.URL
	transport   *http.Transport
	passthrough *httputil.ReverseProxy
	initial     []byte // the initial-response frame

	ctx    context.Context // parent of every request's context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup
}

func newEFOProxy(upstream *url.URL) *efoProxy {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DisableCompression = true // pass bodies as sent, never gzip-negotiated
	ctx, cancel := context.WithCancel(context.Background())
	p := &efoProxy{
		upstream:  upstream,
		transport: tr,
		initial:   initialResponseFrame(),
		ctx:       ctx,
		cancel:    cancel,
	}
	p.passthrough = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = pr.In.Host // the host the client signed
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	return p
}

func (p *efoProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		http.Error(w, "emulator EFO proxy: closed", http.StatusServiceUnavailable)
		return
	}
	defer p.handlers.Done()
	if r.Header.Get("X-Amz-Target") == subscribeToShardTarget {
		p.subscribe(w, r)
		return
	}
	p.passthrough.ServeHTTP(w, r)
}

// enter counts a request in, unless the proxy is closing.
func (p *efoProxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.handlers.Add(1)
	return true
}

// close refuses new requests, cancels those in flight, closes all
// connections and waits for the handlers to return.
func (p *efoProxy) close(srv *http.Server) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	_ = srv.Close()
	done := make(chan struct{})
	go func() {
		p.handlers.Wait()
		close(done)
	}()
	defer p.transport.CloseIdleConnections()
	select {
	case <-done:
		return nil
	case <-time.After(proxyCloseTimeout):
		return fmt.Errorf("emulator: EFO proxy requests still running %v after close", proxyCloseTimeout)
	}
}

// subscribe forwards a SubscribeToShard call and fixes up its response.
func (p *efoProxy) subscribe(w http.ResponseWriter, r *http.Request) {
	// Read the (small JSON) request body first: forwarding the server's body
	// stream lets the transport read it after the proxy has started its
	// answer, when the server may have closed it; the transport then drops
	// the upstream connection and the client sees its stream end early.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		badGateway(w, fmt.Errorf("reading the SubscribeToShard request: %w", err))
		return
	}
	out := p.outbound(r)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		badGateway(w, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK { // already an HTTP error: pass it on
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return
	}

	first, err := readFrame(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		badGateway(w, fmt.Errorf("first SubscribeToShard frame: %w", err))
		return
	}
	if first != nil {
		fe, err := errorOf(first)
		if err != nil {
			badGateway(w, err)
			return
		}
		if fe != nil {
			writeJSONError(w, resp.Header, fe)
			return
		}
	}

	copyHeader(w.Header(), resp.Header)
	w.Header().Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(frame []byte) bool {
		if _, err := w.Write(frame); err != nil {
			return false // the client is gone; the deferred Close ends the upstream call
		}
		return rc.Flush() == nil
	}
	if !send(p.initial) || first == nil || !send(first) {
		return // first == nil: upstream ended before its first event
	}
	for {
		frame, err := readFrame(resp.Body)
		switch {
		case errors.Is(err, io.EOF):
			return // upstream ended the subscription cleanly
		case err != nil:
			// Upstream broke, or the proxy is closing, or the client left.
			// Cut the client's stream instead of ending it cleanly, so that
			// the SDK reports an error as it would for a broken AWS stream
			// (a clean end means the subscription expired normally).
			panic(http.ErrAbortHandler)
		}
		if !send(frame) {
			return
		}
	}
}

// outbound is r addressed to the upstream, with its body and headers
// unchanged except for hop-by-hop headers.
func (p *efoProxy) outbound(r *http.Request) *http.Request {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme = p.upstream.Scheme
	out.URL.Host = p.upstream.Host
	out.URL.Path = strings.TrimSuffix(p.upstream.Path, "/") + r.URL.Path
	out.URL.RawPath = ""
	out.Host = r.Host
	out.Close = false
	if r.ContentLength == 0 {
		out.Body = nil
	}
	removeHopHeaders(out.Header)
	return out
}

// writeJSONError answers with fe the way AWS JSON 1.1 reports errors.
func writeJSONError(w http.ResponseWriter, upstream http.Header, fe *frameError) {
	body := fe.jsonBody()
	h := w.Header()
	if id := upstream.Get("X-Amzn-RequestId"); id != "" {
		h.Set("X-Amzn-RequestId", id)
	}
	h.Set("Content-Type", "application/x-amz-json-1.1")
	h.Set("X-Amzn-ErrorType", fe.Type)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(fe.httpStatus())
	_, _ = w.Write(body)
}

func badGateway(w http.ResponseWriter, err error) {
	http.Error(w, "emulator EFO proxy: "+err.Error(), http.StatusBadGateway)
}

// hopHeaders apply to one connection and are never forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	removeHopHeaders(dst)
}

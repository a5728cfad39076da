package kinesisfake

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Server is an in-process fake of the Kinesis Data Streams API, served over
// real sockets so that the aws-sdk-go-v2 client talks to it unchanged.
type Server struct {
	cfg      config
	log      *slog.Logger
	ln       net.Listener
	srv      *http.Server
	endpoint string
	certPEM  []byte
	certPool *x509.CertPool
	key      []byte // signs iterators and pagination tokens

	st       *state
	reqs     chan func()
	stopLoop chan struct{}
	loopDone chan struct{}

	closing   chan struct{}
	closeOnce sync.Once
	serveDone chan struct{}

	hmu      sync.Mutex
	closed   bool
	handlers sync.WaitGroup

	cmu     sync.Mutex
	clients []*http.Transport

	faults faults
	stats  stats
}

// New starts a fake Kinesis server. Close it when done.
func New(opts ...Opt) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.logger,
		reqs:      make(chan func()),
		stopLoop:  make(chan struct{}),
		loopDone:  make(chan struct{}),
		closing:   make(chan struct{}),
		serveDone: make(chan struct{}),
		key:       make([]byte, 32),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if _, err := rand.Read(s.key); err != nil {
		return nil, err
	}
	s.st = newState(s)
	for _, p := range cfg.streams {
		if err := s.st.presetStream(p, s.now()); err != nil {
			return nil, fmt.Errorf("kinesisfake: stream %s: %w", p.name, err)
		}
	}

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, fmt.Errorf("kinesisfake: listen on %s: %w", cfg.listen, err)
	}
	s.ln = ln
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	var protos http.Protocols
	protos.SetHTTP1(true)
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000},
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		Protocols:         &protos,
	}
	if cfg.tls {
		scheme = "https"
		cert, pool, pemBytes, err := selfSigned(host)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("kinesisfake: certificate: %w", err)
		}
		s.certPEM, s.certPool = pemBytes, pool
		protos.SetHTTP2(true)
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	s.endpoint = scheme + "://" + net.JoinHostPort(host, port)

	go s.runLoop()
	go func() {
		defer close(s.serveDone)
		var err error
		if cfg.tls {
			err = s.srv.ServeTLS(ln, "", "")
		} else {
			err = s.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("kinesisfake: serve", "err", err)
		}
	}()
	return s, nil
}

// Endpoint returns the base URL to give the SDK (kinesis.Options.BaseEndpoint),
// e.g. "http://127.0.0.1:41234".
func (s *Server) Endpoint() string { return s.endpoint }

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Region returns the region used in ARNs.
func (s *Server) Region() string { return s.cfg.region }

// CertificatePEM returns the self-signed certificate in TLS mode (nil
// otherwise), for clients outside this process.
func (s *Server) CertificatePEM() []byte { return s.certPEM }

// HTTPClient returns a new client for the server. In TLS mode it trusts the
// server's certificate and speaks HTTP/2 (negotiated with ALPN); in plain mode
// it is an ordinary HTTP/1.1 client. It also shields the SDK from a race with
// net/http that fast local servers expose (see bodyShield): give it to the
// SDK rather than a client of your own. Close closes its idle connections.
func (s *Server) HTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	if s.cfg.tls {
		tr.TLSClientConfig = &tls.Config{RootCAs: s.certPool, MinVersion: tls.VersionTLS12}
	}
	s.cmu.Lock()
	s.clients = append(s.clients, tr)
	s.cmu.Unlock()
	return &http.Client{Transport: bodyShield{tr}}
}

// bodyShield works around a race between aws-sdk-go-v2 and net/http that a
// server answering as fast as this one exposes. Over HTTP/1.1 the transport
// sends the request body, then reads it once more to check that it is over;
// the SDK closes the body as soon as the response arrives, and its closed
// body's WriteTo returns io.EOF, which io.Copy reports as an error. The
// transport then closes the connection while the SDK is still reading the
// response ("use of closed network connection"). Hiding WriteTo makes that
// last read a plain Read, whose io.EOF means "no more data".
type bodyShield struct{ tr *http.Transport }

type readOnlyBody struct{ io.ReadCloser }

func (b bodyShield) RoundTrip(r *http.Request) (*http.Response, error) {
	r2 := *r
	r2.Header = r.Header.Clone()
	r2.Header.Set(shieldHeader, "shielded")
	if r.Body != nil && r.Body != http.NoBody {
		r2.Body = readOnlyBody{r.Body}
	}
	return b.tr.RoundTrip(&r2)
}

func (b bodyShield) CloseIdleConnections() { b.tr.CloseIdleConnections() }

// NewClient returns an SDK client for the server: region, endpoint, static
// dummy credentials and HTTPClient set; optFns may change anything.
func (s *Server) NewClient(optFns ...func(*kinesis.Options)) *kinesis.Client {
	o := kinesis.Options{
		Region:       s.cfg.region,
		BaseEndpoint: aws.String(s.endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDFAKE", SecretAccessKey: "fake", Source: "kinesisfake"}, nil
		}),
		HTTPClient: s.HTTPClient(),
	}
	return kinesis.New(o, optFns...)
}

// Close stops the server: subscriptions end, connections close, and every
// goroutine the server started has returned when Close returns. Close may be
// called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.hmu.Lock()
		s.closed = true
		s.hmu.Unlock()
		close(s.closing)
		s.srv.Close()
		<-s.serveDone
		s.handlers.Wait()
		close(s.stopLoop)
		<-s.loopDone
		s.cmu.Lock()
		for _, tr := range s.clients {
			tr.CloseIdleConnections()
		}
		s.cmu.Unlock()
	})
}

// enter registers a running handler; it reports false once Close has begun.
func (s *Server) enter() bool {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

// StreamARN returns the ARN the server gives the stream named name.
func (s *Server) StreamARN(name string) string {
	return "arn:aws:kinesis:" + s.cfg.region + ":" + s.cfg.acct + ":stream/" + name
}

func (s *Server) consumerARN(streamName, consumerName string, created time.Time) string {
	return s.StreamARN(streamName) + "/consumer/" + consumerName + ":" + strconv.FormatInt(created.Unix(), 10)
}

// parseStreamARN returns the stream name in a stream ARN of this server.
func (s *Server) parseStreamARN(arn string) (string, *apiError) {
	rest, ok := strings.CutPrefix(arn, "arn:aws:kinesis:")
	parts := strings.SplitN(rest, ":", 3)
	if !ok || len(parts) != 3 || !strings.HasPrefix(parts[2], "stream/") {
		return "", errf(CodeInvalidArgument, "Invalid StreamARN %s.", arn)
	}
	name := strings.TrimPrefix(parts[2], "stream/")
	if name == "" || strings.Contains(name, "/") {
		return "", errf(CodeInvalidArgument, "Invalid StreamARN %s.", arn)
	}
	if parts[0] != s.cfg.region || parts[1] != s.cfg.acct {
		return "", errf(CodeResourceNotFound, "Stream %s under account %s not found.", arn, s.cfg.acct)
	}
	return name, nil
}

// parseConsumerARN splits a consumer ARN of this server into stream and
// consumer names.
func (s *Server) parseConsumerARN(arn string) (streamName, consumerName string, ok bool) {
	prefix := "arn:aws:kinesis:" + s.cfg.region + ":" + s.cfg.acct + ":stream/"
	rest, ok := strings.CutPrefix(arn, prefix)
	if !ok {
		return "", "", false
	}
	streamName, rest, ok = strings.Cut(rest, "/consumer/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return "", "", false
	}
	return streamName, rest[:i], true
}

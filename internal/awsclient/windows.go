package awsclient

import (
	"crypto/tls"
	"sync"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// MinStreamWindow is the smallest stream window StreamWindows gives a
// subscription: one HTTP/2 frame. What bounds a shard's rate then is the
// windows' total over the round trip (8 MiB over 20 ms is 400 MiB/s for all
// the shards together), far more than an instance processes.
const MinStreamWindow = 16 << 10

// StreamWindows sizes the HTTP/2 flow-control windows of fan-out
// subscriptions so that, together, what they may buffer unread stays within
// a share of the input's memory budget, whatever the shard count. A
// subscription's stream buffers up to its window while the pipeline is
// slow; 256 shards at a fixed 1 MiB would hold 256 MiB.
//
// Shards that read by fan-out join while their reader runs; each
// subscription then gets the largest power of two of at most share/joined
// bytes, between MinStreamWindow and the default 1 MiB. A window is a
// setting of an HTTP/2 connection, so each size has its own transport; a
// subscription keeps the window it opened with until it subscribes again
// (every 5 minutes on AWS, or after a failure).
type StreamWindows struct {
	share int64
	tls   *tls.Config

	mu      sync.Mutex
	joined  int
	clients map[int64]*awshttp.BuildableClient
}

// NewStreamWindows returns windows that share bytes between the
// subscriptions, with tlsConf as the input's HTTP client has it (nil: the
// default).
func NewStreamWindows(share int64, tlsConf *tls.Config) *StreamWindows {
	return &StreamWindows{share: share, tls: tlsConf, clients: map[int64]*awshttp.BuildableClient{}}
}

// Join counts a shard reading by fan-out until the returned func is called.
func (w *StreamWindows) Join() (leave func()) {
	w.mu.Lock()
	w.joined++
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			w.joined--
			w.mu.Unlock()
		})
	}
}

// Window is the stream window a subscription opened now gets.
func (w *StreamWindows) Window() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.windowLocked()
}

func (w *StreamWindows) windowLocked() int64 {
	fair := w.share / int64(max(1, w.joined))
	size := int64(streamWindow)
	for size > MinStreamWindow && size > fair {
		size /= 2
	}
	return size
}

// Option is a SubscribeToShard option that makes the call on a connection
// whose stream window is Window.
func (w *StreamWindows) Option(o *kinesis.Options) {
	w.mu.Lock()
	size := w.windowLocked()
	c, ok := w.clients[size]
	if !ok {
		c = httpClientWindow(w.tls, size)
		w.clients[size] = c
	}
	w.mu.Unlock()
	o.HTTPClient = c
}

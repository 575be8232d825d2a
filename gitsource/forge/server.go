package forge

import (
	"net/http"
	"time"
)

// Timeouts of the server NewServer returns.
const (
	ServerReadHeaderTimeout = 5 * time.Second
	ServerReadTimeout       = 15 * time.Second
	ServerWriteTimeout      = 15 * time.Second
	ServerIdleTimeout       = 60 * time.Second
	ServerMaxHeaderBytes    = 64 << 10
)

// NewServer returns an http.Server for the webhook handler with header, read,
// write and idle timeouts and a header size cap, so that a client that sends
// slowly (slowloris) or never finishes holds a connection for seconds only.
func NewServer(addr string, handler http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           handler,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		WriteTimeout:      ServerWriteTimeout,
		IdleTimeout:       ServerIdleTimeout,
		MaxHeaderBytes:    ServerMaxHeaderBytes,
	}
}

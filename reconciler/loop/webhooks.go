package loop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"

	"cairn.dev/cairn/gitsource/forge"
)

// WebhookOptions configure Listen.
type WebhookOptions struct {
	// Address is where POST /hooks/<forge> is served (":8080").
	Address string
	// Receiver verifies and parses deliveries (hooks and their secrets, the
	// tracked branch and repository, limits); see forge.NewReceiver.
	Receiver forge.ReceiverOptions
	// OnPush and OnPullRequest get each verified event; they must not block (a nil
	// one ignores its events).
	OnPush        func(forge.Push)
	OnPullRequest func(forge.PullRequest)
	Log           logr.Logger
}

// Webhooks is a running webhook server.
type Webhooks struct {
	server *http.Server
	log    logr.Logger
}

// Listen binds Address and serves the webhooks on it until Close.
func Listen(opts WebhookOptions) (*Webhooks, error) {
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	recv, err := forge.NewReceiver(opts.Receiver, opts.dispatch)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Address)
	if err != nil {
		return nil, fmt.Errorf("failed to listen for webhooks: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/", recv)
	w := &Webhooks{server: forge.NewServer(opts.Address, mux), log: opts.Log}
	go func() {
		if err := w.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error(err, "webhook server stopped", "address", opts.Address)
		}
	}()
	return w, nil
}

func (o WebhookOptions) dispatch(ev forge.Event) {
	switch e := ev.(type) {
	case forge.Push:
		if o.OnPush != nil {
			o.OnPush(e)
		}
	case forge.PullRequest:
		if o.OnPullRequest != nil {
			o.OnPullRequest(e)
		}
	}
}

// Close stops the server, letting deliveries in flight finish for up to 5 seconds.
func (w *Webhooks) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.server.Shutdown(ctx); err != nil {
		return fmt.Errorf("failed to stop the webhook server: %w", err)
	}
	return nil
}

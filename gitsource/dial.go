package gitsource

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"
)

// go-git's ssh transport dials with a timeout but runs the ssh handshake and
// the session without any deadline, so a host that accepts and never answers
// would hang it. It does dial through golang.org/x/net/proxy when the endpoint
// names a proxy, so each ssh session names a private "proxy" scheme whose
// dialer connects directly and binds the connection to the step's context:
// the connection's deadline is the context's, it is closed when the context
// ends, and it may read at most a byte budget.
const boundDialScheme = "cairn-gitsource-bound"

var (
	registerBoundDial sync.Once
	boundDials        sync.Map // id -> *boundDialer
	boundDialSeq      atomic.Uint64
)

// withBoundDial makes ep dial through a connection bound to ctx.
func withBoundDial(ctx context.Context, ep *transport.Endpoint, byteLimit int64) (*transport.Endpoint, func()) {
	registerBoundDial.Do(func() { proxy.RegisterDialerType(boundDialScheme, lookupBoundDialer) })
	id := strconv.FormatUint(boundDialSeq.Add(1), 10)
	boundDials.Store(id, &boundDialer{ctx: ctx, byteLimit: byteLimit})
	ep.Proxy = transport.ProxyOptions{URL: boundDialScheme + "://" + id}
	return ep, func() { boundDials.Delete(id) }
}

func lookupBoundDialer(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
	d, ok := boundDials.Load(u.Host)
	if !ok {
		return nil, errors.New("ssh dial outside of its step")
	}
	return d.(*boundDialer), nil
}

type boundDialer struct {
	ctx       context.Context
	byteLimit int64
}

func (d *boundDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(d.ctx, network, addr)
}

// DialContext ignores go-git's context (a plain dial timeout) for the step's.
func (d *boundDialer) DialContext(_ context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	conn, err := nd.DialContext(d.ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if deadline, ok := d.ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			conn.Close()
			return nil, err
		}
	}
	stop := context.AfterFunc(d.ctx, func() { conn.Close() })
	return &boundConn{Conn: conn, stop: stop, in: cappedReader{r: conn, left: d.byteLimit}}, nil
}

type boundConn struct {
	net.Conn
	stop func() bool
	in   cappedReader
}

func (c *boundConn) Read(p []byte) (int, error) { return c.in.Read(p) }

func (c *boundConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

package client

import (
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP from 127.0.0.1 to a target until cut: then every
// connection it holds, and every one it accepts while cut, turns into a
// black hole (bytes read and dropped, nothing closed), like a network
// partition. After heal, new connections forward again; black holes stay
// black holes, as a real path's dead connections would.
type cutProxy struct {
	addr   string
	target string
	ln     net.Listener
	mu     sync.Mutex
	cut    bool
	conns  map[*proxyConn]struct{}
	wg     sync.WaitGroup
}

type proxyConn struct {
	mu        sync.Mutex
	dead      bool
	down, up  net.Conn
	closeOnce sync.Once
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String(), target: target, ln: ln, conns: make(map[*proxyConn]struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) accept() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = down.Close()
			continue
		}
		c := &proxyConn{down: down, up: up}
		p.mu.Lock()
		c.dead = p.cut
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { c.pump(c.up, c.down) })
		p.wg.Go(func() { c.pump(c.down, c.up) })
	}
}

// pump copies from src to dst while the connection is alive, and drops
// what it reads once it is dead; a black hole passes no close on either.
func (c *proxyConn) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.isDead() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				c.close()
				return
			}
		}
		if err != nil {
			if !c.isDead() {
				c.close()
			}
			return
		}
	}
}

func (c *proxyConn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		_ = c.down.Close()
		_ = c.up.Close()
	})
}

// Cut turns every connection into a black hole until Heal.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.mu.Lock()
		c.dead = true
		c.mu.Unlock()
	}
}

// Heal lets new connections through again.
func (p *cutProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *cutProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

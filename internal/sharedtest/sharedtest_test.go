package sharedtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestLockedBufferLines(t *testing.T) {
	t.Parallel()
	var b LockedBuffer
	fmt.Fprint(&b, "level=INFO msg=a x\nlevel=INFO msg=b\nlevel=WARN msg=c x")
	if got, want := b.Lines("x"), []string{"level=INFO msg=a x\n", "level=WARN msg=c x"}; !slices.Equal(got, want) {
		t.Errorf("Lines(x) = %q, want %q", got, want)
	}
	if got := b.Lines("absent"); got != nil {
		t.Errorf("Lines(absent) = %q, want none", got)
	}
}

func TestConsecutivePortsAreFree(t *testing.T) {
	t.Parallel()
	base := ConsecutivePorts(t, 3)
	for p := base; p < base+3; p++ {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d of the run at %d: %v", p, base, err)
		}
		defer ln.Close()
	}
}

// ServeH2C answers a client that speaks HTTP/2 without TLS, and only such
// a client, as a worker's Monitor port does for routers.
func TestServeH2CSpeaksUnencryptedHTTP2(t *testing.T) {
	t.Parallel()
	addr := ServeH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/2.0" {
		t.Errorf("served %q, want HTTP/2.0", b)
	}
	h1 := &http.Transport{}
	defer h1.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: h1}).Get("http://" + addr + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("an HTTP/1.1 client was answered %s", resp.Status)
	}
}

func TestRefusedAddrRefusesAndKeepsItsPort(t *testing.T) {
	t.Parallel()
	addr := RefusedAddr(t)
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("a listener took %s while the test holds it", addr)
	}
}

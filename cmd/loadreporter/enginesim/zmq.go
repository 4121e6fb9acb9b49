package enginesim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/ports"
)

// SGLang's load socket, as its scheduler publishes it
// (python/sglang/srt/managers/scheduler_components/load_publisher.py in
// sgl-project/sglang at 069a8c4a37a3fd2576f12f6ce9e8297c22fe5994): topic
// "load", an 8-byte big-endian sequence from 0 per socket, a msgpack array
// ["LoadStat", num_running_reqs, num_waiting_reqs, num_tokens,
// max_total_num_tokens, attn_dp_rank]; a changed stat goes out at once, an
// unchanged one at most once a second (its idle loop resends it every
// second), and at most 8 messages queue (HWM) before PUB sheds.
const (
	loadTopic     = "load"
	loadStatTag   = "LoadStat"
	heartbeat     = time.Second
	loadPubHWM    = 8
	kvEventsTopic = "kv"
	// bindAttempts bounds the search for a free range of ports.
	bindAttempts = 20
)

// loadPublisher owns each rank's load PUB socket and, beside them, one
// KV-event PUB socket per rank that never sends: SGLang only publishes
// load with a KV-event publisher configured, and routers that read
// /server_info's kv_events block (SMG) subscribe to both.
type loadPublisher struct {
	clock  ports.Clock
	host   string // advertised
	base   int    // rank 0's load port; KV events at base+dp
	dp     int
	load   []zmq4.Socket
	kv     []zmq4.Socket
	sendMu sync.Mutex // sends go out in order per socket

	mu     sync.Mutex
	latest []model.Load
	dirty  []bool
	sent   []sentStat
	wake   chan struct{}
}

type sentStat struct {
	at     time.Time
	counts [4]int64
	seq    uint64 // next sequence
	ever   bool
}

// bindLoadPublisher binds 2·dp PUB sockets from endpoint's port on
// (load, then KV events); port 0 finds a free contiguous range.
func bindLoadPublisher(endpoint string, dp int, clock ports.Clock) (*loadPublisher, error) {
	host, port, err := parseEndpoint(endpoint, dp)
	if err != nil {
		return nil, err
	}
	bindHost := host
	if host == "*" {
		bindHost = "0.0.0.0"
	}
	p := &loadPublisher{clock: clock, host: host, dp: dp,
		latest: make([]model.Load, dp), dirty: make([]bool, dp), sent: make([]sentStat, dp),
		wake: make(chan struct{}, 1)}
	for attempt := 0; ; attempt++ {
		socks, base, err := bindRange(bindHost, port, 2*dp)
		if err == nil {
			p.base, p.load, p.kv = base, socks[:dp], socks[dp:]
			for _, s := range p.load {
				_ = s.SetOption(zmq4.OptionHWM, loadPubHWM)
			}
			return p, nil
		}
		if port != 0 || attempt+1 == bindAttempts {
			return nil, fmt.Errorf("--load-publish-endpoint %s: %w", endpoint, err)
		}
	}
}

// bindRange binds n PUB sockets on consecutive ports from port (0: from
// whatever port the first one gets).
func bindRange(host string, port, n int) ([]zmq4.Socket, int, error) {
	quiet := zmq4.WithLogger(log.New(io.Discard, "", 0))
	var socks []zmq4.Socket
	fail := func(err error) ([]zmq4.Socket, int, error) {
		for _, s := range socks {
			_ = s.Close()
		}
		return nil, 0, err
	}
	base := port
	for i := range n {
		s := zmq4.NewPub(context.Background(), quiet)
		addr := "tcp://" + net.JoinHostPort(host, strconv.Itoa(base+i))
		if err := s.Listen(addr); err != nil {
			_ = s.Close()
			return fail(err)
		}
		socks = append(socks, s)
		if i == 0 && base == 0 {
			tcp, ok := s.Addr().(*net.TCPAddr)
			if !ok {
				return fail(errors.New("no port after binding port 0"))
			}
			base = tcp.Port
			if base+n-1 > 65535 {
				return fail(fmt.Errorf("port %d leaves no room for %d sockets", base, n))
			}
		}
	}
	return socks, base, nil
}

// publish takes rank's new snapshot; the run loop sends it.
func (p *loadPublisher) publish(rank int, l model.Load) {
	p.mu.Lock()
	p.latest[rank], p.dirty[rank] = l, true
	p.mu.Unlock()
	signal(p.wake)
}

// run sends what publish was given, and resends each rank's latest stat
// when it has been a heartbeat since the last, until ctx ends.
func (p *loadPublisher) run(ctx context.Context) {
	for {
		next := p.sendDue()
		timer := p.clock.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-p.wake:
		case <-timer.C():
		}
		timer.Stop()
	}
}

// sendDue sends every rank's changed stat and every heartbeat due, and
// returns when the next heartbeat is.
func (p *loadPublisher) sendDue() time.Time {
	now := p.clock.Now()
	next := now.Add(heartbeat)
	type out struct {
		rank int
		msg  zmq4.Msg
	}
	var msgs []out
	p.mu.Lock()
	for r := range p.dp {
		l, s := p.latest[r], &p.sent[r]
		counts := [4]int64{int64(l.NumRunningReqs), int64(l.NumWaitingReqs), l.NumUsedTokens, l.MaxTotalNumTokens}
		changed := p.dirty[r] && (!s.ever || counts != s.counts)
		due := s.ever && !now.Before(s.at.Add(heartbeat))
		p.dirty[r] = false
		if changed || due || !s.ever {
			body, err := msgpack.Marshal([]any{loadStatTag, counts[0], counts[1], counts[2], counts[3], r})
			if err != nil {
				continue // a slice of ints always encodes
			}
			seq := binary.BigEndian.AppendUint64(nil, s.seq)
			msgs = append(msgs, out{r, zmq4.NewMsgFrom([]byte(loadTopic), seq, body)})
			s.seq++
			s.at, s.counts, s.ever = now, counts, true
		}
		if hb := s.at.Add(heartbeat); hb.Before(next) {
			next = hb
		}
	}
	p.mu.Unlock()
	p.sendMu.Lock()
	for _, m := range msgs {
		// PUB queues and sheds at the HWM; an error means the socket is
		// closed, and the stat is superseded by the next anyway.
		_ = p.load[m.rank].Send(m.msg)
	}
	p.sendMu.Unlock()
	return next
}

// kvEvents is the kv_events block of /server_info, as SGLang's
// ServerArgs.describe_kv_events_publisher writes it.
func (p *loadPublisher) kvEvents() map[string]any {
	return map[string]any{
		"publisher":               "zmq",
		"endpoint_host":           p.host,
		"endpoint_port_base":      p.base + p.dp,
		"topic":                   kvEventsTopic,
		"block_size":              1,
		"dp_size":                 p.dp,
		"load_endpoint_port_base": p.base,
		"load_topic":              loadTopic,
	}
}

// endpoint is rank r's load socket.
func (p *loadPublisher) endpoint(r int) string {
	return "tcp://" + net.JoinHostPort(p.host, strconv.Itoa(p.base+r))
}

// kvEndpoint is rank 0's (silent) KV-event socket.
func (p *loadPublisher) kvEndpoint() string {
	return "tcp://" + net.JoinHostPort(p.host, strconv.Itoa(p.base+p.dp))
}

func (p *loadPublisher) close() {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	for _, s := range append(p.load, p.kv...) {
		_ = s.Close()
	}
}

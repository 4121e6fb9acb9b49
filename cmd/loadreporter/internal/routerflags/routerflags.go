package routerflags

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/client"
)

// Router is how a command registers with each worker it dials.
type Router struct {
	Interval  time.Duration
	Lease     time.Duration
	RouterID  string
	AuthToken string
	TLS       bool
	Insecure  bool
}

// Defaults asks for a report a second and a 10 s lease, as
// "<command>-<host>-<pid>", so two commands on one host never replace each
// other's sessions.
func Defaults(command string) Router {
	host, _ := os.Hostname()
	return Router{Interval: time.Second, Lease: 10 * time.Second, RouterID: fmt.Sprintf("%s-%s-%d", command, host, os.Getpid())}
}

// Register declares r's flags on fs, with r's values as defaults.
func (r *Router) Register(fs *flag.FlagSet) {
	fs.DurationVar(&r.Interval, "interval", r.Interval, "report interval to ask each worker for")
	fs.DurationVar(&r.Lease, "lease", r.Lease, "lease to ask each worker for (keep-alives go at the granted renew_after)")
	fs.StringVar(&r.RouterID, "router-id", r.RouterID, "router_id to register as")
	fs.StringVar(&r.AuthToken, "auth-token", r.AuthToken, "bearer token the workers require")
	fs.BoolVar(&r.TLS, "tls", r.TLS, "dial the workers with TLS")
	fs.BoolVar(&r.Insecure, "tls-insecure", r.Insecure, "with --tls: do not verify the workers' certificates")
}

// Check refuses what no worker could grant.
func (r Router) Check() error {
	if r.Interval < time.Millisecond || r.Lease < time.Millisecond {
		return fmt.Errorf("--interval and --lease must be at least 1ms")
	}
	return nil
}

// ClientOptions are package client's options for r.
func (r Router) ClientOptions() client.Options {
	o := client.Options{RouterID: r.RouterID, ReportInterval: r.Interval, Lease: r.Lease, BearerToken: r.AuthToken}
	if r.TLS {
		o.TLS = &tls.Config{InsecureSkipVerify: r.Insecure} //nolint:gosec // opt-in flag
	}
	return o
}

// Targets parses --targets, a comma-separated list of HOST:PORTs. An
// empty list or entry is refused, not skipped: ",,," would read as no
// list at all and a command would quietly fall back to its default.
func Targets(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("--targets: want at least one HOST:PORT")
	}
	var out []string
	for i, t := range strings.Split(list, ",") {
		if t = strings.TrimSpace(t); t == "" {
			return nil, fmt.Errorf("--targets %q: entry %d is empty; want HOST:PORT,HOST:PORT,…", list, i+1)
		}
		if _, _, err := net.SplitHostPort(t); err != nil {
			return nil, fmt.Errorf("--targets: %q: want HOST:PORT", t)
		}
		if slices.Contains(out, t) { // a worker watched twice fails only when it runs
			return nil, fmt.Errorf("--targets: %q is named twice", t)
		}
		out = append(out, t)
	}
	return out, nil
}

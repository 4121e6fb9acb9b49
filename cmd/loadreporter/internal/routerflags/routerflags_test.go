package routerflags

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRegisterParsesEveryFlag(t *testing.T) {
	t.Parallel()
	r := Defaults("test")
	if !strings.HasPrefix(r.RouterID, "test-") || r.Interval != time.Second || r.Lease != 10*time.Second {
		t.Fatalf("defaults %+v", r)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	r.Register(fs)
	err := fs.Parse([]string{"--interval", "250ms", "--lease", "3s", "--router-id", "r1", "--auth-token", "tok", "--tls", "--tls-insecure"})
	if err != nil {
		t.Fatal(err)
	}
	o := r.ClientOptions()
	if o.RouterID != "r1" || o.ReportInterval != 250*time.Millisecond || o.Lease != 3*time.Second || o.BearerToken != "tok" ||
		o.TLS == nil || !o.TLS.InsecureSkipVerify {
		t.Fatalf("client options %+v", o)
	}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	r.Interval = 0
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), "--interval") {
		t.Fatalf("interval 0: %v", err)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	got, err := Targets(" a:1,  b:2 ")
	if err != nil || !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Fatalf("%v, %v", got, err)
	}
	if _, err := Targets("a:1,nohost"); err == nil || !strings.Contains(err.Error(), `"nohost"`) {
		t.Fatalf("a target without a port: %v", err)
	}
	if _, err := Targets("a:1,b:2, a:1"); err == nil || !strings.Contains(err.Error(), `"a:1" is named twice`) {
		t.Fatalf("a target named twice: %v", err)
	}
}

// TestTargetsRefusesEmptyEntries: a list with an empty entry, or none at
// all, is refused on one line naming the flag, never read as fewer
// targets (",,," as no list, and the command's default target).
func TestTargetsRefusesEmptyEntries(t *testing.T) {
	t.Parallel()
	for _, list := range []string{",,,", "", " ", "a:1,,b:2", "a:1, ,b:2", "a:1,", ",a:1"} {
		got, err := Targets(list)
		if err == nil || !strings.HasPrefix(err.Error(), "--targets") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Targets(%q) = %q, %v; want a one-line error naming --targets", list, got, err)
		}
	}
}

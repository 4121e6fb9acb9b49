//go:build linux

package machine

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// spinEnv makes the test binary a child that runs spinFor of CPU, says so
// on stdout and waits for its stdin to close.
const (
	spinEnv = "MACHINE_TEST_SPIN_CHILD"
	spinFor = 300 * time.Millisecond
)

func TestMain(m *testing.M) {
	if os.Getenv(spinEnv) == "1" {
		spinCPU(spinFor)
		os.Stdout.WriteString("spun\n")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// spinCPU runs on the CPU until the process has used d of it, as its
// own rusage counts (not ProcessCPU, which the test reads), or for ten
// seconds.
func spinCPU(d time.Duration) {
	used := func() time.Duration {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start, until := used(), time.Now().Add(10*time.Second)
	for used()-start < d && time.Now().Before(until) {
		for range 1_000_000 {
		}
	}
}

// TestProcessCPUReadsAnotherProcessToTheNanosecond: a child that ran
// 300 ms of CPU reads as at least that, within two of /proc's ticks of
// what /proc says, and not in whole ticks.
func TestProcessCPUReadsAnotherProcessToTheNanosecond(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(stdout, buf); err != nil {
		t.Fatalf("the child never said it spun: %v", err)
	}

	got, err := ProcessCPU(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if got < spinFor {
		t.Errorf("the child ran %v of CPU, read as %v", spinFor, got)
	}
	if diff := (got - st.CPU()).Abs(); diff > 2*time.Second/clockTicks {
		t.Errorf("the CPU clock reads %v, /proc %v: %v apart, want within two ticks", got, st.CPU(), diff)
	}
	if got%(time.Second/clockTicks) == 0 {
		t.Errorf("the CPU clock reads %v, a whole number of ticks", got)
	}
}

func TestProcessCPUOfNoProcessFails(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// The child is reaped: its pid names no process until reused.
	if d, err := ProcessCPU(cmd.Process.Pid); err == nil {
		t.Errorf("a process gone read as %v of CPU, want an error", d)
	}
}

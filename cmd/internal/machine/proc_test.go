package machine

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCountsFieldsAfterTheCommandName(t *testing.T) {
	t.Parallel()
	// proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags
	// minflt cminflt majflt cmajflt utime stime …; a command name may hold
	// spaces and parentheses.
	line := "4242 (nginx: a (b) c) S 4100 4242 4242 0 -1 4194624 120 0 0 0 731 268 0 0 20 0 1 0 1234 10000000 500 18446744073709551615\n"
	st, err := ParseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stat{PPID: 4100, UTime: 731, STime: 268}) {
		t.Fatalf("parsed %+v, want ppid 4100, utime 731, stime 268", st)
	}
	if got, want := st.CPU(), 9990*time.Millisecond; got != want {
		t.Errorf("cpu %v, want %v (999 ticks of 10 ms)", got, want)
	}
	for _, bad := range []string{"", "4242 nginx S 1", "4242 (nginx) S 4100 1 2 3", "4242 (nginx) S x 1 2 3 4 5 6 7 8 9 10 11 12"} {
		if _, err := ParseStat(bad); err == nil {
			t.Errorf("ParseStat(%q) took it", bad)
		}
	}
}

func TestParseStatReadsThisProcess(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	st, err := ParseStat(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if st.PPID != os.Getppid() {
		t.Errorf("ppid %d, want %d", st.PPID, os.Getppid())
	}
}

func TestParseRSS(t *testing.T) {
	t.Parallel()
	status := "Name:\tnginx\nVmPeak:\t  20000 kB\nVmRSS:\t    8724 kB\nRssAnon:\t 1000 kB\n"
	got, err := ParseRSS(status)
	if err != nil || got != 8724*1024 {
		t.Fatalf("ParseRSS = %d, %v; want %d", got, err, 8724*1024)
	}
	for _, bad := range []string{"Name:\tkworker\n", "VmRSS:\t 12 MB\n", "VmRSS:\t x kB\n"} {
		if _, err := ParseRSS(bad); err == nil {
			t.Errorf("ParseRSS(%q) took it", bad)
		}
	}
}

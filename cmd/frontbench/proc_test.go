package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStatCountsFieldsAfterTheCommandName(t *testing.T) {
	t.Parallel()
	// proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags
	// minflt cminflt majflt cmajflt utime stime …; a command name may hold
	// spaces and parentheses.
	line := "4242 (nginx: a (b) c) S 4100 4242 4242 0 -1 4194624 120 0 0 0 731 268 0 0 20 0 1 0 1234 10000000 500 18446744073709551615\n"
	st, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st != (procStat{ppid: 4100, utime: 731, stime: 268}) {
		t.Fatalf("parsed %+v, want ppid 4100, utime 731, stime 268", st)
	}
	if got, want := st.cpu(), 9990*time.Millisecond; got != want {
		t.Errorf("cpu %v, want %v (999 ticks of 10 ms)", got, want)
	}
	for _, bad := range []string{"", "4242 nginx S 1", "4242 (nginx) S 4100 1 2 3", "4242 (nginx) S x 1 2 3 4 5 6 7 8 9 10 11 12"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) took it", bad)
		}
	}
}

func TestParseStatReadsThisProcess(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	st, err := parseStat(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() {
		t.Errorf("ppid %d, want %d", st.ppid, os.Getppid())
	}
}

func TestParseRSS(t *testing.T) {
	t.Parallel()
	status := "Name:\tnginx\nVmPeak:\t  20000 kB\nVmRSS:\t    8724 kB\nRssAnon:\t 1000 kB\n"
	got, err := parseRSS(status)
	if err != nil || got != 8724*1024 {
		t.Fatalf("parseRSS = %d, %v; want %d", got, err, 8724*1024)
	}
	for _, bad := range []string{"Name:\tkworker\n", "VmRSS:\t 12 MB\n", "VmRSS:\t x kB\n"} {
		if _, err := parseRSS(bad); err == nil {
			t.Errorf("parseRSS(%q) took it", bad)
		}
	}
}

func TestTreeIsTheRootAndItsDescendants(t *testing.T) {
	t.Parallel()
	ppids := map[int]int{10: 1, 11: 10, 12: 10, 13: 11, 20: 1, 21: 20, 1: 0}
	got := tree(10, ppids)
	slices.Sort(got)
	if want := []int{10, 11, 12, 13}; !slices.Equal(got, want) {
		t.Errorf("tree(10) = %v, want %v", got, want)
	}
	if got := tree(99, ppids); !slices.Equal(got, []int{99}) {
		t.Errorf("tree of a process without children = %v, want itself", got)
	}
}

// stop ends a child that ignores SIGTERM, and what it forked, by killing
// its process group once the grace is over.
func TestStopKillsTheGroupOfAChildThatIgnoresTerm(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/sh", "-c", `trap "" TERM; sleep 60 & echo $!; wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := startProcess("sh", cmd)
	if err != nil {
		t.Skip("no /bin/sh:", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		c.stop(0)
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		c.stop(0)
		t.Fatal(err)
	}
	if got := c.pids(); !slices.Contains(got, grandchild) {
		t.Errorf("pids() = %v, want it to hold the forked sleep %d", got, grandchild)
	}
	c.stop(50 * time.Millisecond)
	if done, _ := c.exited(); !done {
		t.Fatal("stop returned with the child still running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for running(grandchild) {
		select {
		case <-ctx.Done():
			t.Fatalf("the forked sleep %d outlived stop", grandchild)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// running reports whether pid is a live process (not gone, not a zombie
// waiting to be reaped).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

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

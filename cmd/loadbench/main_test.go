package main

import (
	"slices"
	"strings"
	"testing"
)

func TestPhaseSlotsAutoIsOnePhasePerHundredRouters(t *testing.T) {
	slots, err := parseSlots("1, auto")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		routers int
		want    []int
	}{
		{100, []int{1}}, // auto is 1 there: measured once
		{1000, []int{1, 10}},
		{10000, []int{1, 100}},
		{50000, []int{1, 100}}, // loadreporter's bound
		{10, []int{1}},
	} {
		if got := scenarioSlots(slots, c.routers); !slices.Equal(got, c.want) {
			t.Errorf("--phase-slots 1,auto at %d routers measures %v, want %v", c.routers, got, c.want)
		}
	}
}

func TestPhaseSlotsRefusesWhatLoadreporterRefuses(t *testing.T) {
	for _, bad := range []string{"0", "101", "auto,x", ""} {
		_, err := parseSlots(bad)
		if err == nil || !strings.Contains(err.Error(), "--phase-slots") {
			t.Errorf("--phase-slots %q: error %v, want one naming the flag", bad, err)
		}
	}
}

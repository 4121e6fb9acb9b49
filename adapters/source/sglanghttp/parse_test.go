package sglanghttp

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestIntValue(t *testing.T) {
	tests := []struct {
		lit     string
		want    int64
		wantErr string
	}{
		{lit: "0", want: 0},
		{lit: "-0.0e-5", want: 0},
		{lit: "0e99999999999999999999", want: 0},
		{lit: "12.0", want: 12},
		{lit: "1.5e1", want: 15},
		{lit: "1500e-2", want: 15},
		{lit: "1e18", want: 1_000_000_000_000_000_000},
		{lit: "9223372036854775807", want: 9223372036854775807},
		{lit: "9223372036854775807.000", want: 9223372036854775807},
		{lit: "-9223372036854775808", want: -9223372036854775808},
		{lit: "-9.223372036854775808e18", want: -9223372036854775808},
		{lit: "15e-1", wantErr: "is a float (15e-1), want an integer"},
		{lit: "4503599627370496.5", wantErr: "is a float (4503599627370496.5)"},
		{lit: "1e-99999999999999999999", wantErr: "is a float"},
		{lit: "9223372036854775808", wantErr: "9223372036854775808 is outside the int64 range"},
		{lit: "-9223372036854775809", wantErr: "is outside the int64 range"},
		{lit: "1e19", wantErr: "1e19 is outside the int64 range"},
		{lit: "1e99999999999999999999", wantErr: "is outside the int64 range"},
	}
	for _, tt := range tests {
		t.Run(tt.lit, func(t *testing.T) {
			got, err := intValue(json.Number(tt.lit))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("intValue(%s) = %d, %v; want error containing %q", tt.lit, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("intValue(%s) = %d, %v; want %d", tt.lit, got, err, tt.want)
			}
		})
	}
}

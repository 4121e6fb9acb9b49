package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/loadreporter/loadreporter/domain"
)

// Flags are a command's log settings. Embed them in a command's
// configuration so its fields read c.LogLevel and c.LogFormat.
type Flags struct {
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// LogFormat is text or json.
	LogFormat string
}

// Defaults log at info, as text.
func Defaults() Flags { return Flags{LogLevel: "info", LogFormat: "text"} }

var (
	levels  = []string{"debug", "info", "warn", "error"}
	formats = []string{"text", "json"}
)

// Register declares --log-level and --log-format on fs, with f's values
// as defaults.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.LogLevel, "log-level", f.LogLevel, "debug, info, warn or error")
	fs.StringVar(&f.LogFormat, "log-format", f.LogFormat, "text or json")
}

// Check names the flag whose value cannot work.
func (f Flags) Check() error {
	if !slices.Contains(levels, f.LogLevel) {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", f.LogLevel)
	}
	if !slices.Contains(formats, f.LogFormat) {
		return fmt.Errorf("--log-format %q: want text or json", f.LogFormat)
	}
	return nil
}

// New is the logger f describes, writing to w. A level Check refuses
// reads as info.
func (f Flags) New(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(f.LogLevel))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: oneLineErrors}
	if f.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// oneLineErrors writes an error on one line: pgx and the net package join
// causes with "\n\t", which a text log escapes into one quoted blur.
func oneLineErrors(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindAny {
		if err, ok := a.Value.Any().(error); ok {
			return slog.String(a.Key, domain.OneLine(err.Error()))
		}
	}
	return a
}

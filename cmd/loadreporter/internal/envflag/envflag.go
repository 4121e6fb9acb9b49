package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Prefix prefixes the environment variable of every flag.
const Prefix = "LOADREPORTER_"

// CommandLineOnly, as a flag's value in the extra map of Parse and Usage,
// says the flag has no environment variable: a deprecated alias whose
// LOADREPORTER_* name means something else to another command.
const CommandLineOnly = "-"

// Name is the environment variable that sets flag name.
func Name(name string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse applies environment variables, then args, to fs. Flags given on
// the command line win over the environment; extra maps a flag to a second
// variable it also reads (e.g. DATABASE_URL), with lower precedence, or to
// CommandLineOnly.
//
// Parse prints nothing but the usage, and that only for -h or --help (then
// it returns flag.ErrHelp). Any other problem is one line naming the flag
// or variable, the value and what is wanted (`--stale-after "3x": want a
// duration like 500ms, 3s or 1m`), with a hint to run --help.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string, extra map[string]string) error {
	var valueErr error
	fs.VisitAll(func(f *flag.Flag) { f.Value = explain(f, &valueErr) })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if extra[f.Name] == CommandLineOnly {
			return
		}
		name, v := Name(f.Name), getenv(Name(f.Name))
		if v == "" && extra[f.Name] != "" {
			name, v = extra[f.Name], getenv(extra[f.Name])
		}
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	})
	if len(errs) > 0 {
		return withHint(fs, errors.Join(errs...))
	}
	// The flag package prints the error and the usage on every failure;
	// the caller prints the error, and the usage is for --help.
	usage, output := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(output)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case valueErr != nil:
		return withHint(fs, valueErr)
	}
	return withHint(fs, rephrase(err))
}

// Usage prints every flag with its default and environment variable; a
// flag whose default is empty shows its variable only (its help says what
// empty means).
func Usage(fs *flag.FlagSet, w io.Writer, synopsis string, extra map[string]string) func() {
	return func() {
		fmt.Fprintf(w, "%s\n\nFlags (each also settable as %s<NAME>):\n", synopsis, Prefix)
		fs.VisitAll(func(f *flag.Flag) { printFlag(w, f, extra) })
	}
}

// printFlag prints one flag of a usage.
func printFlag(w io.Writer, f *flag.Flag, extra map[string]string) {
	env := "env " + Name(f.Name)
	switch e := extra[f.Name]; e {
	case CommandLineOnly:
		env = "command line only"
	case "":
	default:
		env += ", " + e
	}
	if f.DefValue != "" {
		env = "default " + f.DefValue + "; " + env
	}
	fmt.Fprintf(w, "  --%s\n        %s (%s)\n", f.Name, f.Usage, env)
}

// Sections group a flag set's flags for its usage, in the order the
// sections are added.
type Sections struct {
	fs   *flag.FlagSet
	list []section
}

type section struct {
	title string
	flags []string
}

// NewSections groups the flags declared on fs through Add.
func NewSections(fs *flag.FlagSet) *Sections { return &Sections{fs: fs} }

// Add runs register, which declares flags on the flag set, and puts the
// flags it declared in a section titled title: first those named in first,
// in that order (the ones most read), then the others by name.
func (s *Sections) Add(title string, register func(fs *flag.FlagSet), first ...string) {
	before := map[string]bool{}
	s.fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	register(s.fs)
	var added []string
	s.fs.VisitAll(func(f *flag.Flag) {
		if !before[f.Name] {
			added = append(added, f.Name)
		}
	})
	sec := section{title: title}
	for _, name := range first {
		if slices.Contains(added, name) {
			sec.flags = append(sec.flags, name)
		}
	}
	for _, name := range added {
		if !slices.Contains(sec.flags, name) {
			sec.flags = append(sec.flags, name)
		}
	}
	s.list = append(s.list, sec)
}

// Titles lists the sections' titles, in order.
func (s *Sections) Titles() []string {
	var out []string
	for _, sec := range s.list {
		out = append(out, sec.title)
	}
	return out
}

// Usage prints the flags as Usage does, section by section, each under
// its title, in the order of the sections and of their declaration;
// flags declared outside Add come last, under "Other".
func (s *Sections) Usage(w io.Writer, synopsis string, extra map[string]string) func() {
	return func() {
		fmt.Fprintf(w, "%s\n\nFlags (each also settable as %s<NAME>), by section:\n", synopsis, Prefix)
		seen := map[string]bool{}
		for _, sec := range s.list {
			fmt.Fprintf(w, "\n%s:\n", sec.title)
			for _, name := range sec.flags {
				seen[name] = true
				printFlag(w, s.fs.Lookup(name), extra)
			}
		}
		var other []*flag.Flag
		s.fs.VisitAll(func(f *flag.Flag) {
			if !seen[f.Name] {
				other = append(other, f)
			}
		})
		if len(other) > 0 {
			fmt.Fprintf(w, "\nOther:\n")
			for _, f := range other {
				printFlag(w, f, extra)
			}
		}
	}
}

// OnCommandLine reports which of fs's flags args sets, apart from the
// environment: a command whose flags exclude each other lets the command
// line win over a variable, as Parse does for one flag. Call it after
// Parse succeeded on the same args.
func OnCommandLine(fs *flag.FlagSet, args []string) map[string]bool {
	set := map[string]bool{}
	probe := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	probe.SetOutput(io.Discard)
	fs.VisitAll(func(f *flag.Flag) {
		probe.Var(recorder{name: f.Name, set: set, bool: isBool(f.Value)}, f.Name, "")
	})
	_ = probe.Parse(args)
	return set
}

// recorder notes that its flag was set and keeps nothing.
type recorder struct {
	name string
	set  map[string]bool
	bool bool
}

func (r recorder) String() string { return "" }
func (r recorder) Set(string) error {
	r.set[r.name] = true
	return nil
}
func (r recorder) IsBoolFlag() bool { return r.bool }

func isBool(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// NoArguments is the error of a command that takes no arguments but was
// given some after its flags (fs parsed args). A stray true or false right
// behind a boolean flag is its value written as a separate word, which
// the flag package reads as an argument: the error says to write
// --flag=false.
func NoArguments(fs *flag.FlagSet, args []string, command string) error {
	if fs.NArg() == 0 {
		return nil
	}
	stray := fs.Arg(0)
	at := len(args) - fs.NArg()
	if v := strings.ToLower(stray); (v == "true" || v == "false") && at > 0 {
		name := strings.TrimLeft(strings.SplitN(args[at-1], "=", 2)[0], "-")
		if f := fs.Lookup(name); f != nil && isBool(f.Value) && !strings.Contains(args[at-1], "=") {
			return fmt.Errorf("--%s %s: a boolean flag takes its value after =, as --%s=%s", name, stray, name, v)
		}
	}
	return fmt.Errorf("%s takes no arguments, got %q", command, fs.Args())
}

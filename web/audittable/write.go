package audittable

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
)

// An Encoder writes tables one after the other as one document, so the
// pages of a reports query (Pages) stream into one CSV file, one JSON
// array or one aligned table. The tables must have the same columns.
type Encoder interface {
	// Encode writes t's rows (and, the first time, what comes before
	// them).
	Encode(t Table) error
	// Close writes what comes after the rows and flushes; it does not
	// close the underlying writer.
	Close() error
}

// WriteCSV writes t as CSV: a header of column names, then each row's raw
// values.
func (t Table) WriteCSV(w io.Writer) error { return write(NewCSVEncoder(w), t) }

// WriteJSON writes t as a JSON array with one object per row, keyed by
// column name in column order: numbers as numbers, times as RFC 3339
// strings, booleans as booleans, absent values as null.
func (t Table) WriteJSON(w io.Writer) error { return write(NewJSONEncoder(w), t) }

// WriteText writes t for people, as the dashboard shows it: the column
// labels, then each row's text, aligned; "(no rows)" when there are none;
// then the note. Times name their zone and show milliseconds
// ("2026-11-30 07:30:00.123 UTC"), since no page heading says UTC.
func (t Table) WriteText(w io.Writer) error { return write(NewTextEncoder(w), t) }

func write(e Encoder, t Table) error {
	if err := e.Encode(t); err != nil {
		return err
	}
	return e.Close()
}

// headings is what each column is called in a header.
func headings(cols []Column, name func(Column) string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = name(c)
	}
	return out
}

// NewCSVEncoder returns an Encoder of CSV (WriteCSV), flushed after every
// table.
func NewCSVEncoder(w io.Writer) Encoder { return &csvEncoder{w: csv.NewWriter(w)} }

type csvEncoder struct {
	w      *csv.Writer
	header bool
}

func (e *csvEncoder) Encode(t Table) error {
	if !e.header {
		e.header = true
		_ = e.w.Write(headings(t.Columns, func(c Column) string { return c.Name }))
	}
	raw := make([]string, len(t.Columns))
	for _, row := range t.Rows {
		for i, c := range row {
			raw[i] = c.Raw
			if t.Columns[i].Kind == KindText {
				raw[i] = inert(c.Raw)
			}
		}
		_ = e.w.Write(raw)
	}
	e.w.Flush()
	return e.w.Error()
}

// inert keeps a text cell from being read as a formula by a spreadsheet
// that opens the download: a worker_addr or last_error is whatever an
// engine or another writer of a shared history put there, and a cell that
// starts with = + - @ (or a tab or CR before one) runs as a formula. Such a
// cell gets a leading apostrophe, as OWASP advises; numbers, times and the
// other typed columns are never text, so a negative number stays one.
func inert(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func (e *csvEncoder) Close() error {
	e.w.Flush()
	return e.w.Error()
}

// NewJSONEncoder returns an Encoder of a JSON array (WriteJSON), indented
// by two spaces like encoding/json's Encoder.SetIndent("", "  ").
func NewJSONEncoder(w io.Writer) Encoder { return &jsonEncoder{w: w} }

type jsonEncoder struct {
	w    io.Writer
	rows int
}

func (e *jsonEncoder) Encode(t Table) error {
	for _, row := range t.Rows {
		b, err := json.MarshalIndent(object{t.Columns, row}, "  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n  "
		if e.rows == 0 {
			sep = "[\n  "
		}
		e.rows++
		if _, err := io.WriteString(e.w, sep); err != nil {
			return err
		}
		if _, err := e.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func (e *jsonEncoder) Close() error {
	end := "\n]\n"
	if e.rows == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(e.w, end)
	return err
}

// object is one row as a JSON object whose keys keep the column order.
type object struct {
	cols  []Column
	cells []Cell
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range o.cols {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(c.Name)
		v, err := json.Marshal(jsonValue(c.Kind, o.cells[i]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonValue types a raw value by its column's kind.
func jsonValue(k Kind, c Cell) any {
	switch {
	case k == KindText || k == KindStatus:
		return c.Raw
	case c.Raw == "":
		return nil
	case k == KindBool:
		return c.Raw == "true"
	case k == KindTime:
		return c.Raw
	}
	// A number; NaN and infinities, which JSON cannot hold, stay strings.
	if f, err := strconv.ParseFloat(c.Raw, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		return json.Number(c.Raw)
	}
	return c.Raw
}

// NewTextEncoder returns an Encoder of aligned text (WriteText). It holds
// every row until Close, since alignment needs the widest cell.
func NewTextEncoder(w io.Writer) Encoder {
	return &textEncoder{out: w, tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

type textEncoder struct {
	out    io.Writer
	tw     *tabwriter.Writer
	header bool
	rows   int
	note   string
}

func (e *textEncoder) Encode(t Table) error {
	if !e.header {
		e.header = true
		labels := headings(t.Columns, func(c Column) string { return c.Label })
		if _, err := fmt.Fprintln(e.tw, strings.Join(labels, "\t")); err != nil {
			return err
		}
	}
	text := make([]string, len(t.Columns))
	for _, row := range t.Rows {
		for i, c := range row {
			text[i] = oneLine(c.Text)
			if t.Columns[i].Kind == KindTime && c.Raw != "" {
				text[i] = textTime(c.Raw, text[i])
			}
		}
		if _, err := fmt.Fprintln(e.tw, strings.Join(text, "\t")); err != nil {
			return err
		}
	}
	e.rows += len(t.Rows)
	e.note = t.Note
	return nil
}

func (e *textEncoder) Close() error {
	if err := e.tw.Flush(); err != nil {
		return err
	}
	if e.rows == 0 {
		if _, err := fmt.Fprintln(e.out, "(no rows)"); err != nil {
			return err
		}
	}
	if e.note != "" {
		_, err := fmt.Fprintln(e.out, "note:", e.note)
		return err
	}
	return nil
}

// oneLine keeps a cell on its line and in its column: a last_error may
// hold tabs and newlines.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// series is one line of a chart: a value per x position (NaN: none).
type series struct {
	Name  string
	Color string
	// Flat draws a reference: the first value across the whole panel,
	// dashed.
	Flat bool
	Y    []float64
}

// panel is one plot of a chart.
type panel struct {
	Title  string
	Series []series
}

// chart is a row of panels sharing the x positions and the legend, drawn
// as SVG with a logarithmic y axis.
type chart struct {
	Title, XLabel, YLabel string
	X                     []string
	Panels                []panel
	Note                  string
}

const (
	panelW, panelH       = 420, 300
	marginL, marginR     = 70, 20
	marginTop, marginBot = 60, 60
)

// svg renders the chart.
func (c chart) svg() string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range c.Panels {
		for _, s := range p.Series {
			for _, y := range s.Y {
				if y > 0 && !math.IsInf(y, 0) && !math.IsNaN(y) {
					lo, hi = min(lo, y), max(hi, y)
				}
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1
	}
	lo, hi = niceBelow(lo), niceAbove(hi)
	if hi <= lo {
		hi = niceAbove(lo * 1.01)
	}
	legendRows := 0
	if len(c.Panels) > 0 {
		legendRows = (len(c.Panels[0].Series) + 1) / 2
	}
	w := len(c.Panels)*(panelW+marginL+marginR) + 20
	h := marginTop + panelH + marginBot + 22*legendRows + 24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", 20, html.EscapeString(c.Title))
	yOf := func(v float64) float64 {
		v = min(max(v, lo), hi)
		return float64(marginTop) + float64(panelH)*(1-(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
	}
	for pi, p := range c.Panels {
		x0 := 10 + pi*(panelW+marginL+marginR) + marginL
		xOf := func(i int) float64 {
			if len(c.X) == 1 {
				return float64(x0) + panelW/2
			}
			return float64(x0) + float64(panelW)*float64(i)/float64(len(c.X)-1)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", x0, marginTop-12, html.EscapeString(p.Title))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", x0, marginTop, panelW, panelH)
		for d := math.Pow(10, math.Floor(math.Log10(lo))); d <= hi*1.0001; d *= 10 {
			for _, m := range []float64{1, 2, 5} {
				v := d * m
				if v < lo*0.9999 || v > hi*1.0001 {
					continue
				}
				y := yOf(v)
				fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, x0+panelW, y, y)
				fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, y+4, tick(v))
			}
		}
		for i, x := range c.X {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xOf(i), marginTop+panelH+16, html.EscapeString(x))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x0+panelW/2, marginTop+panelH+36, html.EscapeString(c.XLabel))
		fmt.Fprintf(&b, `<text transform="translate(%d %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0-52, marginTop+panelH/2, html.EscapeString(c.YLabel))
		for _, s := range p.Series {
			if s.Flat {
				if len(s.Y) > 0 && !math.IsNaN(s.Y[0]) {
					y := yOf(s.Y[0])
					fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", x0, x0+panelW, y, y, s.Color)
				}
				continue
			}
			var pts []string
			for i, y := range s.Y {
				if math.IsNaN(y) {
					continue
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(i), yOf(y)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", xOf(i), yOf(y), s.Color)
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), s.Color)
		}
	}
	if len(c.Panels) > 0 {
		y0 := marginTop + panelH + marginBot
		for i, s := range c.Panels[0].Series {
			x := 10 + marginL + (i%2)*(w/2)
			y := y0 + 22*(i/2)
			dash := ""
			if s.Flat {
				dash = ` stroke-dasharray="6 4"`
			}
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", x, x+28, y, y, s.Color, dash)
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+36, y+4, html.EscapeString(s.Name))
		}
	}
	if c.Note != "" {
		fmt.Fprintf(&b, `<text x="20" y="%d" font-size="11" fill="#555">%s</text>`+"\n", h-12, html.EscapeString(c.Note))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceBelow is the largest of 1, 2 and 5 times a power of ten at most v.
func niceBelow(v float64) float64 {
	d := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{5, 2, 1} {
		if d*m <= v {
			return d * m
		}
	}
	return d
}

// niceAbove is the smallest of 1, 2 and 5 times a power of ten at least v.
func niceAbove(v float64) float64 {
	d := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if d*m >= v {
			return d * m
		}
	}
	return 10 * d
}

// tick labels a value of the y axis (seconds).
func tick(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%g ms", math.Round(v*1000))
	}
	return fmt.Sprintf("%g s", v)
}

// write writes the chart to path, making its folder.
func (c chart) write(path string) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(c.svg()), 0o644)
}

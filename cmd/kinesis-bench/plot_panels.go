package main

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strings"
)

// A figure of time-series panels, as a Grafana dashboard shows them: each
// panel its own y axis from 0, all on one time axis in seconds, with the
// figure's events marked on every panel.

// timePanel is one panel: series of values against seconds since the
// start, stacked (each drawn on top of those before it, its band tinted)
// or not.
type timePanel struct {
	title   string
	stacked bool
	ss      []timeSeries
}

// timeSeries is a named line; a NaN value is a gap (the instance was not
// running).
type timeSeries struct {
	name string
	ts   []float64 // seconds since the start, ascending
	vs   []float64
}

// mark is an event at a time, drawn as a dashed vertical line.
type mark struct {
	at    float64
	label string
}

const (
	figureW, figurePanelH = 1200, 330
	figureTop             = 34 // the figure's title
	// Within a panel: room for the y labels, the title, the x labels and
	// one legend row.
	panelL, panelR, panelT, panelB = 62, 16, 36, 52
)

// plotPanels draws the panels cols to a row over the time span [0, end].
func plotPanels(path, title string, cols int, end float64, ps []timePanel, marks []mark) error {
	rows := (len(ps) + cols - 1) / cols
	c := newCanvasSized(figureW, figureTop+rows*figurePanelH, title)
	w := figureW / cols
	for i, p := range ps {
		x, y := (i%cols)*w, figureTop+(i/cols)*figurePanelH
		c.timePanel(image.Rect(x, y, x+w, y+figurePanelH), end, p, marks)
	}
	return c.save(path)
}

func (c canvas) timePanel(r image.Rectangle, end float64, p timePanel, marks []mark) {
	x0, x1, y0, y1 := r.Min.X+panelL, r.Max.X-panelR, r.Max.Y-panelB, r.Min.Y+panelT
	c.text(x0, r.Min.Y+20, p.title, colAxis)
	ss := p.ss
	if p.stacked {
		ss = stack(p.ss)
	}
	ymax := 0.0
	for _, s := range ss {
		for _, v := range s.vs {
			if !math.IsNaN(v) {
				ymax = math.Max(ymax, v)
			}
		}
	}
	ystep := niceStep(math.Max(ymax, 1) / 4)
	ymax = math.Max(math.Ceil(ymax/ystep), 1) * ystep
	xpos := func(t float64) int { return x0 + int(t/end*float64(x1-x0)) }
	ypos := func(v float64) int { return y0 - int(v/ymax*float64(y0-y1)) }
	for v := 0.0; v <= ymax*1.0001; v += ystep {
		y := ypos(v)
		c.rect(x0, y, x1, y+1, colGrid)
		label := shortNumber(v)
		c.text(x0-textWidth(label)-6, y+4, label, colAxis)
	}
	tstep := niceStep(end / 6)
	for t := 0.0; t <= end*1.0001; t += tstep {
		label := fmt.Sprintf("%gs", t)
		c.text(xpos(t)-textWidth(label)/2, y0+16, label, colAxis)
	}
	for _, m := range marks {
		x := xpos(m.at)
		for y := y1; y < y0; y += 8 {
			c.rect(x, y, x+1, min(y+4, y0), colAxis)
		}
		c.text(x+4, y1+10, m.label, colAxis)
	}
	if p.stacked {
		for j := range ss {
			c.band(ss, j, xpos, ypos, tint(palette[j%len(palette)]))
		}
	}
	for j, s := range ss {
		col := palette[j%len(palette)]
		for i := 1; i < len(s.vs); i++ {
			// Gaps are the series' own: stacked, a gap is drawn as nothing
			// on top of the series below.
			if orig := p.ss[j].vs; math.IsNaN(orig[i-1]) || math.IsNaN(orig[i]) {
				continue
			}
			c.line(xpos(s.ts[i-1]), ypos(s.vs[i-1]), xpos(s.ts[i]), ypos(s.vs[i]), col)
		}
	}
	c.line(x0, y0, x1, y0, colAxis)
	c.line(x0, y0, x0, y1, colAxis)
	// The legend: one row under the time axis.
	lx := x0
	for j, s := range p.ss {
		c.rect(lx, y0+28, lx+12, y0+38, palette[j%len(palette)])
		c.text(lx+16, y0+38, s.name, colAxis)
		lx += 16 + textWidth(s.name) + 18
	}
}

// stack makes each series the sum of itself and those before it; a gap
// adds nothing.
func stack(ss []timeSeries) []timeSeries {
	out := make([]timeSeries, len(ss))
	for j, s := range ss {
		out[j] = timeSeries{name: s.name, ts: s.ts, vs: make([]float64, len(s.vs))}
		for i, v := range s.vs {
			below := 0.0
			if j > 0 {
				below = out[j-1].vs[i]
			}
			if math.IsNaN(v) {
				v = 0
			}
			out[j].vs[i] = below + v
		}
	}
	return out
}

// band tints the area between stacked series j-1 (or 0) and j.
func (c canvas) band(ss []timeSeries, j int, xpos func(float64) int, ypos func(float64) int, col color.Color) {
	s := ss[j]
	lower := func(i int) float64 {
		if j == 0 {
			return 0
		}
		return ss[j-1].vs[i]
	}
	for i := 1; i < len(s.vs); i++ {
		xa, xb := xpos(s.ts[i-1]), xpos(s.ts[i])
		for x := xa; x < xb; x++ {
			f := float64(x-xa) / float64(xb-xa)
			lo := lower(i-1) + f*(lower(i)-lower(i-1))
			hi := s.vs[i-1] + f*(s.vs[i]-s.vs[i-1])
			if hi > lo {
				c.rect(x, ypos(hi), x+1, ypos(lo), col)
			}
		}
	}
}

// tint is col faded two thirds of the way to white.
func tint(col color.RGBA) color.RGBA {
	fade := func(v uint8) uint8 { return uint8(int(v) + (255-int(v))*2/3) }
	return color.RGBA{fade(col.R), fade(col.G), fade(col.B), 255}
}

// shortNumber writes an axis value in few characters: 1500 as 1.5k.
func shortNumber(v float64) string {
	if v >= 1000 {
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1000), ".0") + "k"
	}
	return fmt.Sprintf("%g", v)
}

package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Plots of the bench's figures as PNG files: a bar chart on a log scale
// (latency percentiles), a line chart (figures against shard count), and a
// figure of time-series panels (the -fleet mode's dashboard).

const (
	plotW, plotH                    = 760, 420
	marginL, marginR, marginT, marB = 80, 150, 40, 50
)

var (
	colBackground = color.RGBA{255, 255, 255, 255}
	colAxis       = color.RGBA{60, 60, 60, 255}
	colGrid       = color.RGBA{225, 225, 225, 255}
	palette       = []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}}
)

// series is one named line or set of bars.
type series struct {
	name   string
	values []float64 // one per category or x value
}

type canvas struct{ img *image.RGBA }

func newCanvas(title string) canvas { return newCanvasSized(plotW, plotH, title) }

func newCanvasSized(w, h int, title string) canvas {
	c := canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	draw.Draw(c.img, c.img.Bounds(), &image.Uniform{colBackground}, image.Point{}, draw.Src)
	c.text(marginL, 22, title, colAxis)
	return c
}

func (c canvas) text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func textWidth(s string) int { return 7 * len(s) }

func (c canvas) rect(x0, y0, x1, y1 int, col color.Color) {
	draw.Draw(c.img, image.Rect(x0, y0, x1, y1), &image.Uniform{col}, image.Point{}, draw.Src)
}

func (c canvas) line(x0, y0, x1, y1 int, col color.Color) {
	dx, dy := x1-x0, y1-y0
	n := max(abs(dx), abs(dy), 1)
	for i := 0; i <= n; i++ {
		x, y := x0+dx*i/n, y0+dy*i/n
		c.rect(x-1, y-1, x+1, y+1, col)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func (c canvas) legend(ss []series) {
	for i, s := range ss {
		y := marginT + 10 + 20*i
		c.rect(plotW-marginR+15, y-8, plotW-marginR+27, y+2, palette[i%len(palette)])
		c.text(plotW-marginR+32, y+2, s.name, colAxis)
	}
}

func (c canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plotBarsLog draws grouped bars on a log scale: one group per category, one
// bar per series.
func plotBarsLog(path, title, unit string, categories []string, ss []series) error {
	c := newCanvas(title)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, v := range s.values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	x0, x1, y0, y1 := marginL, plotW-marginR, plotH-marB, marginT
	ypos := func(v float64) int {
		f := (math.Log10(v) - math.Log10(lo)) / (math.Log10(hi) - math.Log10(lo))
		return y0 - int(f*float64(y0-y1))
	}
	for v := lo; v <= hi*1.0001; v *= 10 {
		y := ypos(v)
		c.rect(x0, y, x1, y+1, colGrid)
		label := fmt.Sprintf("%g %s", v, unit)
		c.text(x0-textWidth(label)-6, y+4, label, colAxis)
	}
	group := (x1 - x0) / len(categories)
	bar := group / (len(ss) + 1)
	for i, cat := range categories {
		gx := x0 + i*group
		c.text(gx+group/2-textWidth(cat)/2, y0+18, cat, colAxis)
		for j, s := range ss {
			v := s.values[i]
			if v <= 0 {
				continue
			}
			bx := gx + bar/2 + j*bar
			top := ypos(v)
			c.rect(bx, top, bx+bar-4, y0, palette[j%len(palette)])
			label := fmt.Sprintf("%.3g", v)
			c.text(bx+(bar-4)/2-textWidth(label)/2, top-4, label, colAxis)
		}
	}
	c.line(x0, y0, x1, y0, colAxis)
	c.line(x0, y0, x0, y1, colAxis)
	c.legend(ss)
	return c.save(path)
}

// plotLines draws series against xs on linear axes from 0.
func plotLines(path, title, xLabel, yLabel string, xs []float64, ss []series) error {
	c := newCanvas(title)
	xmax, ymax := 0.0, 0.0
	for _, x := range xs {
		xmax = math.Max(xmax, x)
	}
	for _, s := range ss {
		for _, v := range s.values {
			ymax = math.Max(ymax, v)
		}
	}
	ystep := niceStep(ymax / 5)
	ymax = math.Ceil(ymax/ystep) * ystep
	x0, x1, y0, y1 := marginL, plotW-marginR, plotH-marB, marginT
	xpos := func(x float64) int { return x0 + int(x/xmax*float64(x1-x0)) }
	ypos := func(v float64) int { return y0 - int(v/ymax*float64(y0-y1)) }
	for v := 0.0; v <= ymax*1.0001; v += ystep {
		y := ypos(v)
		c.rect(x0, y, x1, y+1, colGrid)
		label := fmt.Sprintf("%g", v)
		c.text(x0-textWidth(label)-6, y+4, label, colAxis)
	}
	for _, x := range xs {
		label := fmt.Sprintf("%g", x)
		c.text(xpos(x)-textWidth(label)/2, y0+18, label, colAxis)
	}
	c.text(x0+(x1-x0)/2-textWidth(xLabel)/2, y0+38, xLabel, colAxis)
	c.text(8, y1-12, yLabel, colAxis)
	for j, s := range ss {
		col := palette[j%len(palette)]
		for i := range s.values {
			x, y := xpos(xs[i]), ypos(s.values[i])
			c.rect(x-3, y-3, x+3, y+3, col)
			if i > 0 {
				c.line(xpos(xs[i-1]), ypos(s.values[i-1]), x, y, col)
			}
		}
	}
	c.line(x0, y0, x1, y0, colAxis)
	c.line(x0, y0, x0, y1, colAxis)
	c.legend(ss)
	return c.save(path)
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

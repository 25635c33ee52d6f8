package bench

import (
	"fmt"
	"math"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	svgLeft      = 90  // room for the y-axis labels
	svgRight     = 30  //
	svgTop       = 110 // title, subtitle and legend above the plot
	svgPlotH     = 260 // plot height
	svgBottom    = 80  // x labels and the footnote below the plot
	svgGroupW    = 190 // one scenario × pipeline
	svgBarW      = 58
	svgBarGap    = 10
	svgMinWidth  = 960
	colorSluice  = "#2f6fdb"
	colorDirect  = "#9aa3ad"
	colorGrid    = "#e3e6ea"
	colorText    = "#1f2328"
	colorSubtle  = "#57606a"
	svgFontStack = "font-family=\"Helvetica, Arial, sans-serif\""
)

// SVG renders the requests per second of every row as grouped bars, sluice
// next to direct, with each value above its bar and the ratio sluice/direct
// above each group. It is a complete, standalone SVG document.
func (r *Report) SVG() string {
	groups := max(len(r.Rows), 1)
	width := max(svgLeft+groups*svgGroupW+svgRight, svgMinWidth)
	height := svgTop + svgPlotH + svgBottom
	plotBottom := svgTop + svgPlotH

	top := 0.0
	for _, row := range r.Rows {
		for _, v := range []float64{row.Sluice.RPS, row.Direct.RPS} {
			if !math.IsNaN(v) {
				top = math.Max(top, v)
			}
		}
	}
	step, axisMax := niceAxis(top * 1.12) // headroom for the labels
	y := func(v float64) float64 { return float64(plotBottom) - v/axisMax*svgPlotH }

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s font-size="12" fill="%s">`+"\n",
		width, height, width, height, svgFontStack, colorText)
	w(`<title>sluice-lab bench: requests per second, sluice vs direct EVALSHA</title>` + "\n")
	w(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	w(`<text x="%d" y="30" font-size="17" font-weight="bold">%s</text>`+"\n", svgLeft,
		esc("Requests per second: RL.TAKE through sluice vs EVALSHA straight at the shard"))
	w(`<text x="%d" y="52" fill="%s">%s</text>`+"\n", svgLeft, colorSubtle,
		esc(fmt.Sprintf("median of %s, higher is better; %d clients, %s, uniform keyspace %s, %d primaries",
			plural(r.Rounds, "round"), r.Clients, plural(r.Threads, "redis-benchmark thread"), thousands(float64(r.Keyspace)), len(r.Primaries))))
	w(`<text x="%d" y="70" fill="%s" font-size="11">%s</text>`+"\n", svgLeft, colorSubtle, esc(r.Machine.String()))
	legendX := svgLeft
	for _, l := range []struct{ name, color string }{{"sluice (RL.TAKE)", colorSluice}, {"direct (EVALSHA)", colorDirect}} {
		w(`<rect x="%d" y="82" width="14" height="14" fill="%s"/>`+"\n", legendX, l.color)
		w(`<text x="%d" y="94">%s</text>`+"\n", legendX+20, esc(l.name))
		legendX += 160
	}

	// Grid and y axis.
	for v := 0.0; v <= axisMax+step/2; v += step {
		yy := y(v)
		w(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", svgLeft, yy, width-svgRight, yy, colorGrid)
		w(`<text x="%d" y="%.1f" text-anchor="end" fill="%s">%s</text>`+"\n", svgLeft-8, yy+4, colorSubtle, esc(short(v)))
	}
	w(`<text transform="translate(22 %d) rotate(-90)" text-anchor="middle" fill="%s">requests per second</text>`+"\n",
		svgTop+svgPlotH/2, colorSubtle)
	w(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", svgLeft, plotBottom, width-svgRight, plotBottom, colorSubtle)

	groupW := (width - svgLeft - svgRight) / groups // wider than svgGroupW when the chart is at its minimum width
	for i, row := range r.Rows {
		svgGroup(w, row, svgLeft+i*groupW+(groupW-2*svgBarW-svgBarGap)/2, plotBottom, y)
	}
	w(`<text x="%d" y="%d" fill="%s" font-size="11">%s</text>`+"\n", svgLeft, height-12, colorSubtle,
		esc("Both sides run the same token-bucket script, which writes on every request. uniform: random keys, every shard; hot: one key, one shard."))
	w("</svg>\n")
	return b.String()
}

// svgGroup draws one row's bars, sluice and direct, from x = gx: each
// value above its bar, the ratio above the group, the scenario and depth
// below; y maps requests/s to the plot's height.
func svgGroup(w func(format string, args ...any), row Row, gx, plotBottom int, y func(float64) float64) {
	highest := float64(plotBottom)
	for j, bar := range []struct {
		v     float64
		color string
	}{{row.Sluice.RPS, colorSluice}, {row.Direct.RPS, colorDirect}} {
		x := gx + j*(svgBarW+svgBarGap)
		label := "n/a"
		if !math.IsNaN(bar.v) {
			yy := y(bar.v)
			highest = math.Min(highest, yy)
			w(`<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				x, yy, svgBarW, float64(plotBottom)-yy, bar.color, esc(thousands(bar.v)+" req/s"))
			label = short(bar.v)
		}
		ly := math.Min(y(zeroIfNaN(bar.v)), float64(plotBottom)) - 5
		w(`<text x="%d" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n", x+svgBarW/2, ly, esc(label))
	}
	cx := gx + svgBarW + svgBarGap/2
	w(`<text x="%d" y="%.1f" text-anchor="middle" font-weight="bold">%s</text>`+"\n",
		cx, highest-22, esc("sluice/direct "+fixed(row.Ratio(), 2)))
	w(`<text x="%d" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", cx, plotBottom+20, esc(string(row.Scenario)))
	w(`<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", cx, plotBottom+36, colorSubtle,
		esc(fmt.Sprintf("pipeline %d", row.Pipeline)))
}

// niceAxis returns a tick step of 1, 2 or 5 × 10^k giving about five ticks
// up to at least top, and the axis maximum, a multiple of the step.
func niceAxis(top float64) (step, axisMax float64) {
	if !(top > 0) {
		return 1, 5
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f <= 1:
		step = mag
	case f <= 2:
		step = 2 * mag
	case f <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	return step, math.Ceil(top/step) * step
}

// short formats a rate compactly: 950, 41.2k, 1.25M.
func short(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trimZeros(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case a >= 1e3:
		return trimZeros(fmt.Sprintf("%.1f", v/1e3)) + "k"
	}
	return fmt.Sprintf("%.0f", v)
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func zeroIfNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

var svgEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

// esc escapes text for SVG character data and attribute values.
func esc(s string) string { return svgEscaper.Replace(s) }

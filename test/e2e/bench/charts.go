package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The servers' colours, the same in every chart.
var serverColor = map[string]color.Color{"floor": color.RGBA{0x99, 0x99, 0x99, 0xff}, "stock": color.RGBA{0xd9, 0x5f, 0x02, 0xff}, "ours": color.RGBA{0x1b, 0x9e, 0x77, 0xff}}

// charts writes the run's pictures into dir as SVG and returns their file
// names: qps.svg (median QPS per mix for floor, stock and ours) when QPS was
// measured, memory.svg and ready.svg (RssAnon and time to ready against the
// number of imports, stock and ours) when footprints were, and soak.svg
// after -soak.
func (r *report) charts(dir string) (written []string, err error) {
	type chart struct {
		name  string
		w     vg.Length
		draw  func() (*plot.Plot, error)
		drawn bool
	}
	for _, c := range []chart{
		{"qps.svg", 16, r.qpsChart, len(r.results) > 0},
		{"memory.svg", 12, func() (*plot.Plot, error) {
			return r.footprintChart("Anonymous memory (RssAnon) after start-up", "MiB", func(f footprint) float64 { return float64(f.Settled.Anon) / 1024 })
		}, len(r.footprints) > 0},
		{"ready.svg", 12, func() (*plot.Plot, error) {
			return r.footprintChart("Time from start to ready", "seconds", func(f footprint) float64 { return f.ReadyIn.Seconds() })
		}, len(r.footprints) > 0},
		{"soak.svg", 16, func() (*plot.Plot, error) { return soakChart(r.soak.samples) }, r.soak != nil},
	} {
		if !c.drawn {
			continue
		}
		p, err := c.draw()
		if err == nil {
			err = p.Save(c.w*vg.Centimeter, 9*vg.Centimeter, filepath.Join(dir, c.name))
		}
		if err != nil {
			return written, fmt.Errorf("chart %s: %w", c.name, err)
		}
		written = append(written, c.name)
	}
	return written, nil
}

// newPlot is a chart of y against x, from 0 up, with a grid and the legend
// at the top.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text, p.Y.Min = title, x, y, 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// qpsChart is one group of bars per mix, a bar per server: the median QPS of
// its runs. The floor runs only the mixes it can answer.
func (r *report) qpsChart() (*plot.Plot, error) {
	p := newPlot("Queries per second (median of rounds, one core)", "", "QPS")
	var names []string
	for _, m := range r.mixes {
		names = append(names, m.Label)
	}
	p.NominalX(names...)
	width := vg.Points(18)
	for i, s := range []string{"floor", "stock", "ours"} {
		values := make(plotter.Values, len(r.mixes))
		for j, m := range r.mixes {
			values[j], _, _, _ = r.stat(s, m.Key, qpsOf)
			p.Y.Max = max(p.Y.Max, 1.25*values[j]) // room for the legend above the bars
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, err
		}
		bars.Color, bars.LineStyle.Width, bars.Offset = serverColor[s], 0, vg.Length(i-1)*width
		p.Add(bars)
		p.Legend.Add(s, bars)
	}
	return p, nil
}

// footprintChart is a line per server family (stock, ours) of value against
// the number of imports, from the footprints that measured it.
func (r *report) footprintChart(title, unit string, value func(footprint) float64) (*plot.Plot, error) {
	var lines []series
	for _, family := range []string{"stock", "ours"} {
		var pts plotter.XYs
		for _, f := range r.footprints {
			if strings.HasPrefix(f.Server, family) && value(f) > 0 {
				pts = append(pts, plotter.XY{X: float64(f.Imports), Y: value(f)})
			}
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
		lines = append(lines, series{family, serverColor[family], pts})
	}
	return lineChart(title, "ServiceImports", unit, lines)
}

// series is one line of a lineChart.
type series struct {
	name  string
	color color.Color
	pts   plotter.XYs
}

// lineChart is a line with points per series of y (in unit) against x;
// series without points are left out, and those without a name from the
// legend.
func lineChart(title, x, unit string, lines []series) (*plot.Plot, error) {
	p := newPlot(title, x, unit)
	p.Legend.Left = true
	for _, s := range lines {
		if len(s.pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color = s.color, s.color
		p.Add(line, points)
		if s.name != "" {
			p.Legend.Add(s.name, line, points)
		}
	}
	return p, nil
}

// soakChart is every figure against the writes, as a percentage of its
// value after the first -soak-every writes, between grey lines at ±5%.
func soakChart(samples []soakSample) (*plot.Plot, error) {
	ref, last := samples[min(1, len(samples)-1)], float64(samples[len(samples)-1].Updates)/1000
	grey := color.Gray{Y: 0xaa}
	lines := []series{{"", grey, plotter.XYs{{X: 0, Y: 95}, {X: last, Y: 95}}}, {"", grey, plotter.XYs{{X: 0, Y: 105}, {X: last, Y: 105}}}}
	colors := []color.Color{serverColor["ours"], serverColor["stock"], color.RGBA{0x75, 0x70, 0xb3, 0xff},
		color.RGBA{0xe7, 0x29, 0x8a, 0xff}, color.RGBA{0x66, 0xa6, 0x1e, 0xff}, color.RGBA{0xa6, 0x76, 0x1d, 0xff}}
	for k, name := range soakFigures {
		var pts plotter.XYs
		for _, s := range samples {
			pts = append(pts, plotter.XY{X: float64(s.Updates) / 1000, Y: 100 * s.Values[k] / ref.Values[k]})
		}
		lines = append(lines, series{name, colors[k], pts})
	}
	p, err := lineChart("One replica during the long churn, after a GC (grey: ±5%)", "writes (thousands)", fmt.Sprintf("%% of its value at %d writes", ref.Updates), lines)
	if err == nil {
		p.Y.Max = 2 * max(p.Y.Max, 110) // room for the legend above the lines
	}
	return p, err
}

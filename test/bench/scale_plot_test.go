package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// The plot of B8, drawn as SVG by hand so that the benchmark needs no plotting
// library: one panel for the time to all Ready and one for the peak RSS, against M,
// one line per configuration. Beside each time line a dashed one in proportion to M
// from the smallest M measured, so that a time growing faster than M shows above it
// (the fixed start-up makes that line steep, never flat); the RSS panel, whose
// fixed part is large, shows issue 24's bound instead.

// plotLine is one configuration's points, sorted by x.
type plotLine struct {
	label string
	xs    []float64
	ys    []float64
}

// plotPanel is one chart of the plot.
type plotPanel struct {
	title, yUnit string
	lines        []plotLine
	proportional bool    // draw each line's proportional reference
	target       float64 // a bound drawn across the panel (0: none)
	targetLabel  string
}

var plotColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// scalePlot draws B8's runs: time in seconds and the largest replica's peak RSS in
// MiB against M, one line per number of replicas; caption says where and at which
// commit they ran.
func scalePlot(runs []scaleRun, caption string) []byte {
	timeP := plotPanel{title: "empty cluster → all Ready", yUnit: "s", proportional: true}
	rssP := plotPanel{title: "peak RSS of the largest replica", yUnit: "MiB", target: mib(scaleRSSTarget),
		targetLabel: fmt.Sprintf("target at M = %d, one replica", scaleRSSTargetM)}
	for _, n := range scaleReplicas {
		var mine []scaleRun
		for _, r := range runs {
			if r.replicas == n {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		slices.SortFunc(mine, func(a, b scaleRun) int { return a.m - b.m })
		tl, rl := plotLine{label: mine[0].label()}, plotLine{label: mine[0].label()}
		for _, r := range mine {
			tl.xs, tl.ys = append(tl.xs, float64(r.m)), append(tl.ys, r.cold.wall.Seconds())
			rl.xs, rl.ys = append(rl.xs, float64(r.m)), append(rl.ys, mib(r.peakRSS()))
		}
		timeP.lines, rssP.lines = append(timeP.lines, tl), append(rssP.lines, rl)
	}
	return drawPlot("B8: M instances through the controller", caption, "M (instances)", timeP, rssP)
}

// Geometry of a panel, in SVG user units.
const (
	panelW, panelH = 460.0, 340.0
	captionH       = 14.0
	marginL        = 64.0
	marginR        = 28.0
	marginT        = 56.0
	marginB        = 96.0 // the x axis's label and the legend
)

// drawPlot draws the panels side by side under a title, with a caption in the
// bottom right corner; each panel's axes start at 0, so that a line's curvature is
// its growth against x.
func drawPlot(title, caption, xLabel string, panels ...plotPanel) []byte {
	var b bytes.Buffer
	w := panelW * float64(len(panels))
	h := panelH + captionH // the caption on a line of its own, under the legends
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" text-anchor="middle" font-size="15">%s</text>`+"\n", w/2, html.EscapeString(title))
	for i, p := range panels {
		drawPanel(&b, float64(i)*panelW, xLabel, p)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" font-size="10" fill="#555">%s</text>`+"\n", w-8, h-6, html.EscapeString(caption))
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func drawPanel(b *bytes.Buffer, left float64, xLabel string, p plotPanel) {
	var xMax, yMax float64
	for _, l := range p.lines {
		for i := range l.xs {
			xMax, yMax = max(xMax, l.xs[i]), max(yMax, l.ys[i])
		}
	}
	if p.target > 0 {
		yMax = max(yMax, p.target)
	}
	xMax, yMax = niceCeil(xMax), niceCeil(yMax)
	x0, y0 := left+marginL, panelH-marginB // the origin
	pw, ph := panelW-marginL-marginR, panelH-marginT-marginB
	px := func(x float64) float64 { return x0 + x/xMax*pw }
	py := func(y float64) float64 { return y0 - y/yMax*ph }
	fmt.Fprintf(b, `<g><text x="%.1f" y="42" text-anchor="middle" font-size="13">%s (%s)</text>`+"\n",
		x0+pw/2, html.EscapeString(p.title), html.EscapeString(p.yUnit))
	for i := 0; i <= 5; i++ {
		x, y := xMax*float64(i)/5, yMax*float64(i)/5
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, py(y), x0+pw, py(y))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, py(y)+4, tickLabel(y))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), y0+16, tickLabel(x))
	}
	fmt.Fprintf(b, `<polyline points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="black"/>`+"\n", x0, y0-ph, x0, y0, x0+pw, y0)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x0+pw/2, y0+34, html.EscapeString(xLabel))
	if p.target > 0 {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="6 3"/>`+"\n", x0, py(p.target), x0+pw, py(p.target))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#555">%s %s %s</text>`+"\n", x0+6, py(p.target)-5,
			html.EscapeString(p.targetLabel), tickLabel(p.target), html.EscapeString(p.yUnit))
	}
	for i, l := range p.lines {
		colour := plotColours[i%len(plotColours)]
		pts := make([]string, len(l.xs))
		for j := range l.xs {
			pts[j] = fmt.Sprintf("%.1f,%.1f", px(l.xs[j]), py(l.ys[j]))
		}
		if p.proportional && len(l.xs) > 1 && l.xs[0] > 0 { // in proportion to x from the first point, clipped at the panel's top
			slope := l.ys[0] / l.xs[0]
			xEnd := min(l.xs[len(l.xs)-1], yMax/slope)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 4" opacity="0.6"/>`+"\n",
				px(l.xs[0]), py(l.ys[0]), px(xEnd), py(slope*xEnd), colour)
		}
		fmt.Fprintf(b, `<polyline class="data" points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colour)
		for j := range l.xs {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>M = %s: %s %s</title></circle>`+"\n",
				px(l.xs[j]), py(l.ys[j]), colour, tickLabel(l.xs[j]), tickLabel(l.ys[j]), html.EscapeString(p.yUnit))
		}
		ly := y0 + 52 + float64(i)*16
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", x0, ly-4, x0+20, ly-4, colour)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x0+26, ly, html.EscapeString(l.label))
	}
	if p.proportional && len(p.lines) > 0 {
		ly := y0 + 52 + float64(len(p.lines))*16
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#555">dashed: in proportion to M from the smallest M</text>`+"\n", x0, ly)
	}
	b.WriteString("</g>\n")
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so that an axis of five
// ticks has round labels; 1 for nothing to show.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 2, 5, 10} {
		if v <= f*p {
			return f * p
		}
	}
	return 10 * p
}

// tickLabel prints a number without trailing zeros ("2000", "0.4", "12.5").
func tickLabel(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// wellFormedXML reads the whole of doc as XML.
func wellFormedXML(doc []byte) error {
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// TestScalePlotPlacesEachRunOnItsLine: each configuration's line passes through its
// runs in order of M, at the place its time and RSS give on axes from 0, and the SVG
// is well-formed.
func TestScalePlotPlacesEachRunOnItsLine(t *testing.T) {
	run := func(m, replicas int, wall time.Duration, rss ...int64) scaleRun {
		return scaleRun{m: m, replicas: replicas, cold: measurement{wall: wall}, rss: rss}
	}
	runs := []scaleRun{ // out of order, as subtests may append them
		run(5000, 1, 300*time.Second, 400<<20),
		run(1000, 1, 50*time.Second, 250<<20),
		run(1000, 3, 60*time.Second, 100<<20, 120<<20, 110<<20),
		run(5000, 3, 280*time.Second, 200<<20, 210<<20, 190<<20),
	}
	svg := scalePlot(runs, "engine <commit> & co")
	if err := wellFormedXML(svg); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, svg)
	}
	var lines [][][2]float64 // the data polylines, time panel first
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		el, ok := tok.(xml.StartElement)
		if !ok || el.Name.Local != "polyline" {
			continue
		}
		var class, points string
		for _, a := range el.Attr {
			switch a.Name.Local {
			case "class":
				class = a.Value
			case "points":
				points = a.Value
			}
		}
		if class != "data" {
			continue
		}
		var pts [][2]float64
		for _, p := range strings.Fields(points) {
			var x, y float64
			if _, err := fmt.Sscanf(p, "%f,%f", &x, &y); err != nil {
				t.Fatalf("point %q: %v", p, err)
			}
			pts = append(pts, [2]float64{x, y})
		}
		lines = append(lines, pts)
	}
	if len(lines) != 4 {
		t.Fatalf("want 4 data lines (2 configurations × time and RSS), got %d:\n%s", len(lines), svg)
	}
	// Axes: x to niceCeil(5000) = 5000, time to niceCeil(300) = 500 s, RSS to niceCeil(the target, 600) = 1000 MiB.
	at := func(panel int, x, xMax, y, yMax float64) [2]float64 {
		left := float64(panel) * panelW
		return [2]float64{left + marginL + x/xMax*(panelW-marginL-marginR), panelH - marginB - y/yMax*(panelH-marginT-marginB)}
	}
	want := [][][2]float64{
		{at(0, 1000, 5000, 50, 500), at(0, 5000, 5000, 300, 500)}, // 1 replica, time
		{at(0, 1000, 5000, 60, 500), at(0, 5000, 5000, 280, 500)}, // 3 replicas, time
		{at(1, 1000, 5000, 250, 1000), at(1, 5000, 5000, 400, 1000)},
		{at(1, 1000, 5000, 120, 1000), at(1, 5000, 5000, 210, 1000)}, // the largest replica
	}
	for i := range want {
		for j := range want[i] {
			got := lines[i][j]
			if math.Abs(got[0]-want[i][j][0]) > 0.1 || math.Abs(got[1]-want[i][j][1]) > 0.1 {
				t.Errorf("line %d, point %d: got %v, want %v", i, j, got, want[i][j])
			}
		}
	}
	if err := wellFormedXML(scalePlot(nil, "")); err != nil {
		t.Errorf("without a run (every configuration failed) the plot is still drawn: %v", err)
	}
	if !bytes.Contains(svg, []byte("3 replicas (--shards 3 --leader-elect)")) || !bytes.Contains(svg, []byte("1 replica (--shards 1)")) {
		t.Errorf("the legend names both configurations:\n%s", svg)
	}
}

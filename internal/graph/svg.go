package graph

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"slices"
)

// Sizes of an SVG drawing, in pixels.
const (
	svgNodeWidth  = 240
	svgNodeHeight = 34
	svgColumnGap  = 110
	svgRowGap     = 22
	svgMargin     = 16
	svgMaxLabel   = 30
)

// SVG draws g as an SVG image, cairn's own layered drawing (no layout engine to
// ship or run): each instance in the column after everything it comes after, an
// arrow from it to each of those (dashed and labelled with the kind for a
// contract), failed instances outlined red and waiting ones amber, focus drawn
// bold. link gives the address a node links to ("" for none). Every text is
// escaped: instance names and kinds come from people's repositories. Only SVG
// presentation attributes are used, so a strict Content-Security-Policy (no
// inline style) shows it as drawn.
func (g Graph) SVG(focus string, link func(key string) string) string {
	g = g.Normalized()
	layer := map[string]int{}
	for range g.Nodes { // longest path, bounded: a cycle stops growing after |nodes| rounds
		changed := false
		for _, e := range g.Edges {
			if e.From != e.To && layer[e.From] < layer[e.To]+1 && layer[e.To]+1 < len(g.Nodes) {
				layer[e.From], changed = layer[e.To]+1, true
			}
		}
		if !changed {
			break
		}
	}
	columns := map[int][]string{}
	maxCol, maxRow := 0, 0
	for _, n := range g.Nodes {
		c := layer[n.Key]
		columns[c] = append(columns[c], n.Key)
		maxCol = max(maxCol, c)
		maxRow = max(maxRow, len(columns[c]))
	}
	type point struct{ x, y int }
	at := map[string]point{}
	for c, keys := range columns {
		slices.Sort(keys)
		for r, k := range keys {
			at[k] = point{svgMargin + c*(svgNodeWidth+svgColumnGap), svgMargin + r*(svgNodeHeight+svgRowGap)}
		}
	}
	width := 2*svgMargin + (maxCol+1)*svgNodeWidth + maxCol*svgColumnGap
	height := 2*svgMargin + maxRow*svgNodeHeight + max(0, maxRow-1)*svgRowGap
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="graph" role="img" width="%d" height="%d" viewBox="0 0 %d %d">`,
		width, height, width, height)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">` +
		`<path d="M0,0 L10,5 L0,10 z" fill="#5b6576"/></marker></defs>`)
	for _, e := range g.Edges {
		from, to := at[e.From], at[e.To]
		if e.From == e.To {
			continue
		}
		x1, y1 := from.x, from.y+svgNodeHeight/2
		x2, y2 := to.x+svgNodeWidth, to.y+svgNodeHeight/2
		if from.x <= to.x { // a cycle's back edge: around the right side
			x1 = from.x + svgNodeWidth
		}
		dash := ""
		if e.Kind == Contract {
			dash = ` stroke-dasharray="5,4"`
		}
		mid := (x1 + x2) / 2
		fmt.Fprintf(&b, `<path d="M%d,%d C%d,%d %d,%d %d,%d" fill="none" stroke="#5b6576" stroke-width="1.3"%s marker-end="url(#arrow)"><title>%s</title></path>`,
			x1, y1, mid, y1, mid, y2, x2, y2, dash, esc(e.From+" → "+e.To+" ("+edgeReason(e)+")"))
		if e.Kind == Contract && e.Label != "" {
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#5b6576" text-anchor="middle">%s</text>`,
				mid, (y1+y2)/2-4, esc(cut(e.Label, svgMaxLabel)))
		}
	}
	for _, n := range g.Nodes {
		p := at[n.Key]
		stroke, width, nodeDash := "#9aa5b5", "1", ""
		switch n.State {
		case StateUnknown:
			nodeDash = ` stroke-dasharray="3,3"`
		case StateFailed:
			stroke, width = "#b3261e", "2"
		case StateWaiting:
			stroke, width = "#8a5a00", "2"
		}
		weight := "400"
		if n.Key == focus {
			weight, width = "700", "2.5"
		}
		href := ""
		if link != nil {
			href = link(n.Key)
		}
		if href != "" {
			fmt.Fprintf(&b, `<a href="%s">`, esc(href))
		}
		fmt.Fprintf(&b, `<g class="node"><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="5" fill="#ffffff" stroke="%s" stroke-width="%s"%s/>`,
			esc(n.Key+stateSuffix(n.State)), p.x, p.y, svgNodeWidth, svgNodeHeight, stroke, width, nodeDash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12.5" font-weight="%s" fill="#1d2430">%s</text></g>`,
			p.x+10, p.y+svgNodeHeight/2+4, weight, esc(cut(n.Key, svgMaxLabel)))
		if href != "" {
			b.WriteString(`</a>`)
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func stateSuffix(s State) string {
	if s == StateOK {
		return ""
	}
	return " (" + string(s) + ")"
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

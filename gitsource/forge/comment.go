package forge

import (
	"fmt"
	"regexp"
	"strings"
)

// PlanComment returns the body of cairn's plan comment: PlanMarker on the
// first line, then body, the whole cut to limit bytes with CutComment.
func PlanComment(body string, limit int) string {
	body = strings.TrimPrefix(body, PlanMarker+"\n")
	head := PlanMarker + "\n"
	return head + CutComment(body, limit-len(head))
}

// IsPlanComment reports whether a comment body is a cairn plan comment: it
// starts with PlanMarker (a quoted copy, "> <!-- cairn-plan -->", does not).
func IsPlanComment(body string) bool {
	return strings.HasPrefix(strings.TrimLeft(body, " \t\r\n"), PlanMarker)
}

// CutComment fits a Markdown body into limit bytes. A body that fits is
// returned unchanged. Otherwise it keeps the leading sections whole (a
// section starts at an ATX heading or a <details> line outside code fences)
// and appends a note that names the sections it left out and how many bytes
// they held. When not even the first section fits, that section is cut at a
// line boundary, an open code fence and open <details> elements are closed,
// and the note says so. The result is never longer than limit and, when body
// is valid UTF-8, is valid UTF-8.
func CutComment(body string, limit int) string {
	if len(body) <= limit {
		return body
	}
	if limit <= 0 {
		return ""
	}
	sections := splitSections(body)
	kept := len(body)
	for k := len(sections) - 1; k >= 1; k-- {
		kept -= len(sections[k].text)
		note := cutNote(sections[k:], len(body)-kept, len(sections), false)
		if kept+len(note) <= limit {
			return body[:kept] + note
		}
	}
	return cutFirstSection(sections, len(body), limit)
}

// cutFirstSection keeps as many lines of the first section as fit next to the
// note; failing that, the note alone; failing that, the body's first bytes.
func cutFirstSection(sections []section, size, limit int) string {
	note := cutNote(sections, size, len(sections), true)
	budget := limit - len(note)
	if budget > 0 {
		if part := partialSection(sections[0].text, budget); part != "" {
			return part + note
		}
	}
	if len(note) <= limit {
		return note
	}
	return cut(sections[0].text, limit)
}

// section is a run of Markdown lines that starts at a boundary.
type section struct {
	text  string
	title string
}

var (
	headingLine = regexp.MustCompile(`^#{1,6}(\s|$)`)
	detailsLine = regexp.MustCompile(`(?i)^\s*<details[\s>]`)
	summaryText = regexp.MustCompile(`(?is)<summary[^>]*>(.*?)</summary>`)
	htmlTag     = regexp.MustCompile(`<[^>]*>`)
)

// splitSections splits body at headings and <details> lines outside code
// fences. The concatenation of the sections' text is body.
func splitSections(body string) []section {
	var sections []section
	start, inFence := 0, false
	for pos := 0; pos < len(body); {
		end := strings.IndexByte(body[pos:], '\n')
		if end < 0 {
			end = len(body) - pos - 1
		}
		line := body[pos : pos+end+1]
		if isFence(line) {
			inFence = !inFence
		} else if !inFence && pos > start && (headingLine.MatchString(line) || detailsLine.MatchString(line)) {
			sections = append(sections, newSection(body[start:pos], len(sections)))
			start = pos
		}
		pos += end + 1
	}
	return append(sections, newSection(body[start:], len(sections)))
}

func newSection(text string, index int) section {
	return section{text: text, title: sectionTitle(text, index)}
}

func isFence(line string) bool {
	trimmed := strings.TrimLeft(line, " ")
	return strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")
}

// sectionTitle is the heading text, or the <summary> text of a <details>
// section, stripped of markup and cut; "section N" otherwise.
func sectionTitle(text string, index int) string {
	first, _, _ := strings.Cut(text, "\n")
	title := ""
	if headingLine.MatchString(first) {
		title = strings.TrimLeft(first, "#")
	} else if m := summaryText.FindStringSubmatch(cut(text, 1024)); m != nil {
		title = m[1]
	}
	title = htmlTag.ReplaceAllString(title, "")
	title = strings.Join(strings.Fields(strings.NewReplacer("`", "", "*", "", "_", "", "[", "", "]", "").Replace(title)), " ")
	if title == "" {
		return fmt.Sprintf("section %d", index+1)
	}
	return cut(title, 60)
}

// cutNote says which sections (holding bytes bytes) were left out. With
// partial, the first of them was kept in part.
func cutNote(left []section, bytes, total int, partial bool) string {
	what := fmt.Sprintf("left out %d of %d sections (%s)", len(left), total, sizeText(bytes))
	if partial {
		what = fmt.Sprintf("cut inside %q and left out %d of %d sections (%s)", left[0].title, len(left)-1, total, sizeText(bytes))
		left = left[1:]
	}
	return "\n\n---\n> **Cut to fit the forge's comment limit:** " + what + names(left) + ".\n"
}

// names lists up to eight section titles.
func names(left []section) string {
	if len(left) == 0 {
		return ""
	}
	var list []string
	for i, s := range left {
		if i == 8 {
			list = append(list, fmt.Sprintf("and %d more", len(left)-i))
			break
		}
		list = append(list, "`"+s.title+"`")
	}
	return ": " + strings.Join(list, ", ")
}

func sizeText(n int) string {
	if n < 10*1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d KiB", n/1024)
}

// partialSection keeps whole lines of text within budget bytes, including
// what it takes to close an open code fence and open <details> elements.
func partialSection(text string, budget int) string {
	var b strings.Builder
	inFence, open := false, 0
	for _, line := range strings.SplitAfter(text, "\n") {
		nextFence, nextOpen := inFence, open
		if isFence(line) {
			nextFence = !nextFence
		} else if !nextFence {
			lower := strings.ToLower(line)
			nextOpen += strings.Count(lower, "<details") - strings.Count(lower, "</details>")
		}
		if b.Len()+len(line)+len(closers(nextFence, nextOpen, line)) > budget {
			break
		}
		b.WriteString(line)
		inFence, open = nextFence, nextOpen
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + closers(inFence, open, b.String())
}

// closers closes a code fence and open <details> elements after text.
func closers(inFence bool, open int, text string) string {
	var c strings.Builder
	if !strings.HasSuffix(text, "\n") {
		c.WriteString("\n")
	}
	if inFence {
		c.WriteString("```\n")
	}
	for ; open > 0; open-- {
		c.WriteString("</details>\n")
	}
	return c.String()
}

package bench

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// decodeSVG checks that doc is well-formed XML with an <svg> root and
// returns the text of every <text> element and the number of <rect>s.
func decodeSVG(t *testing.T, doc string) (texts []string, rects int) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	var stack []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 && (tok.Name.Local != "svg" || tok.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element is %v, want svg in the SVG namespace", tok.Name)
			}
			if tok.Name.Local == "rect" {
				rects++
			}
			stack = append(stack, tok.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1] == "text" {
				texts = append(texts, string(tok))
			}
		}
	}
	if len(stack) != 0 {
		t.Fatalf("unclosed elements %v", stack)
	}
	return texts, rects
}

func TestSVG(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	texts, rects := decodeSVG(t, r.SVG())
	// background + 2 legend swatches + 2 bars per row
	if want := 3 + 2*len(r.Rows); rects != want {
		t.Errorf("%d rects, want %d", rects, want)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{
		"Test CPU <2 GHz> & more", // escaped in the document, plain once decoded
		"sluice/direct 0.50", "21k", "42k", "31k", "62k",
		"uniform", "hot", "pipeline 1", "pipeline 16", "median of 2 rounds",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("SVG text lacks %q:\n%s", want, all)
		}
	}
}

func TestSVGDegenerate(t *testing.T) {
	t.Parallel()
	empty := &Report{Rounds: 1}
	decodeSVG(t, empty.SVG())

	r := sampleReport()
	r.Rows[0].Direct.RPS = math.NaN()
	texts, rects := decodeSVG(t, r.SVG())
	if want := 3 + 2*len(r.Rows) - 1; rects != want {
		t.Errorf("%d rects, want %d: a NaN has no bar", rects, want)
	}
	if all := strings.Join(texts, "\n"); !strings.Contains(all, "sluice/direct n/a") {
		t.Errorf("SVG text lacks the n/a ratio:\n%s", all)
	}
}

func TestNiceAxis(t *testing.T) {
	t.Parallel()
	tests := []struct{ top, step, max float64 }{
		{0, 1, 5},
		{math.NaN(), 1, 5},
		{45000, 10000, 50000},
		{72000, 20000, 80000},
		{9.5, 2, 10},
		{1.1e6, 500000, 1.5e6},
	}
	for _, tt := range tests {
		step, top := niceAxis(tt.top)
		if step != tt.step || top != tt.max {
			t.Errorf("niceAxis(%v) = %v, %v; want %v, %v", tt.top, step, top, tt.step, tt.max)
		}
	}
}

// The chart of sampleReport, byte for byte (go test -run TestSVGGolden
// -update rewrites it).
func TestSVGGolden(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "bench.golden.svg")
	got := sampleReport().SVG()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the chart differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The reference tables of docs/ that follow the code: the server's settings, the static
// backends' keys and the appproxy section's keys each have a row, and the metrics table keeps
// the markers that TestE2EMetricsReferenceAndDashboard regenerates it between. TestDocLinks
// keeps the links between README.md and docs/ pointing at files and headings that exist;
// TestGoFilesCiteNoOutsideDocument keeps the code's comments readable from the repository alone.

const (
	configurationDoc = "../../docs/configuration.md"
	appProxyDoc      = "../../docs/appproxy.md"
)

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tableRows returns the lines of doc that are rows of a Markdown table.
func tableRows(doc string) []string {
	var rows []string
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
		}
	}
	return rows
}

// hasRow reports whether one table row holds every one of cells.
func hasRow(rows []string, cells ...string) bool {
	for _, row := range rows {
		all := true
		for _, c := range cells {
			if !strings.Contains(row, c) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func TestDocsNameEverySetting(t *testing.T) {
	conf := readDoc(t, configurationDoc)
	rows := tableRows(conf)
	for _, s := range settings {
		if !hasRow(rows, "`--"+s.flag+"`", "| "+s.env+" |", "`"+s.key+"`") {
			t.Errorf("%s: no table row names `--%s`, %s and `%s`", configurationDoc, s.flag, s.env, s.key)
		}
	}
	for _, k := range fileOnlyKeys {
		if !strings.Contains(conf, "`"+k+":`") && !hasRow(rows, "`"+k+"`") {
			t.Errorf("%s does not mention the file key %s", configurationDoc, k)
		}
	}
	for _, k := range backendKeys {
		if !strings.Contains(conf, " "+k+": ") {
			t.Errorf("%s: the backends example lacks %s", configurationDoc, k)
		}
	}
	appRows := tableRows(readDoc(t, appProxyDoc))
	for _, k := range appProxyKeys {
		if !hasRow(appRows, "`"+k+"`") {
			t.Errorf("%s: no table row names the appproxy key `%s`", appProxyDoc, k)
		}
	}
	if _, _, _, ok := splitMetricsReference(readDoc(t, metricsReferenceFile)); !ok {
		t.Errorf("%s lacks the marker lines around its generated table", metricsReferenceFile)
	}
}

// mdLink matches a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link in README.md and docs/*.md names a file of the repository
// and, when it has a #fragment, a heading of that file (GitHub's anchors).
func TestDocLinks(t *testing.T) {
	docs, _ := filepath.Glob("../../docs/*.md")
	docs = append(docs, "../../README.md")
	if len(docs) < 2 {
		t.Fatalf("found only %q", docs)
	}
	for _, doc := range docs {
		text := readDoc(t, doc)
		for _, m := range mdLink.FindAllStringSubmatch(withoutCode(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %v", doc, target, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchors(readDoc(t, path))[frag] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", doc, target, path)
			}
		}
	}
}

// withoutCode drops fenced code blocks, whose brackets are not links.
func withoutCode(doc string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// anchors returns the anchors GitHub gives a document's headings: lower case, punctuation
// dropped except - and _, spaces as -, and -1, -2… on repeats.
func anchors(doc string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range strings.Split(withoutCode(doc), "\n") {
		heading := strings.TrimLeft(line, "#")
		if heading == line || !strings.HasPrefix(heading, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+string(rune('0'+n))] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// outsideDocument matches what names a document outside the repository: the design documents
// by file name (a path to one of the same name in code is the repository's own docs/ file), a
// spec directory or section, and the issue tracker's numbers. inComment matches those names in
// a comment whatever stands before them: a reader cannot tell the repository's docs/ file from
// the design document of the same name, so a comment states the rule instead.
var (
	outsideDocument = regexp.MustCompile(`(?i)(^|[^/\w.-])(gateway|relay|appproxy|architecture)\.md\b|\bspec[/]|\bspec section\b|\bissues?\s*#?\d+`)
	inComment       = regexp.MustCompile(`(?i)//.*\b(gateway|relay|appproxy|architecture)\.md\b`)
)

// TestGoFilesCiteNoOutsideDocument: a comment states the rule it follows; one that sends the
// reader to a document the repository does not hold cannot be followed.
func TestGoFilesCiteNoOutsideDocument(t *testing.T) {
	files := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		text := readDoc(t, path)
		if lower := strings.ToLower(text); !strings.Contains(lower, ".md") && !strings.Contains(lower, "spec") &&
			!strings.Contains(lower, "issue") {
			return nil // what the expression looks for cannot be there (it is slow under -race)
		}
		for i, line := range strings.Split(text, "\n") {
			m := outsideDocument.FindString(line)
			if m == "" {
				m = inComment.FindString(line)
			}
			if m != "" {
				t.Errorf("%s:%d names a document outside the repository (%q): state the rule instead", path, i+1, strings.TrimSpace(m))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked only %d Go files", files)
	}
}

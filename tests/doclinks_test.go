package tests

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// The documents a reader follows from the README: the README itself and
// every page of docs/. Paths are relative to the repository root, which is
// this package's parent.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, filepath.ToSlash(strings.TrimPrefix(d, "../")))
	}
	return out
}

// mdDoc is one Markdown document as a reader of the rendered page sees it:
// the links and images it holds and the anchors its headings make.
type mdDoc struct {
	links   []string        // destinations of links and images, in order
	anchors map[string]bool // heading anchors, as GitHub makes them
}

// parseDoc reads the Markdown file at path (relative to the repository
// root) with goldmark, GitHub's table syntax included, so links inside code
// spans and fenced blocks are not taken for links and links in tables are.
func parseDoc(t *testing.T, path string) mdDoc {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	md := goldmark.New(goldmark.WithExtensions(extension.Table))
	root := md.Parser().Parse(text.NewReader(src))
	doc := mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	err = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			// GitHub numbers repeated headings' anchors: x, x-1, x-2.
			a := headingAnchor(string(n.Text(src)))
			if k := seen[a]; k > 0 {
				doc.anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				doc.anchors[a] = true
			}
			seen[a]++
		case *ast.Link:
			doc.links = append(doc.links, string(n.Destination))
		case *ast.Image:
			doc.links = append(doc.links, string(n.Destination))
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// headingAnchor is the anchor GitHub gives a heading of this text: lower
// case, every character but letters, digits, '-', '_' and spaces dropped,
// each space a '-' ("Choosing `--phase-slots`" is "choosing---phase-slots").
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// external says whether a destination leaves the repository on purpose
// (a web page, a mail address): those are not files to check.
var external = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// TestDocLinksResolve: every relative link and image in the README and in
// docs/*.md names a file or folder inside the repository, and a link with
// an anchor names a heading of the Markdown file it points to.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]mdDoc{}
	doc := func(path string) mdDoc {
		d, ok := parsed[path]
		if !ok {
			d = parseDoc(t, path)
			parsed[path] = d
		}
		return d
	}
	checked := 0
	for _, from := range documents(t) {
		for _, dest := range doc(from).links {
			if external.MatchString(dest) {
				continue
			}
			checked++
			target, anchor, _ := strings.Cut(dest, "#")
			target, err := url.PathUnescape(target)
			if err != nil {
				t.Errorf("%s: link %q: %v", from, dest, err)
				continue
			}
			to := from // a bare #anchor is a heading of the same page
			if target != "" {
				if strings.HasPrefix(target, "/") {
					t.Errorf("%s: link %q is absolute; write it relative to %s", from, dest, filepath.Dir(from))
					continue
				}
				to = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), target)))
			}
			if to == ".." || strings.HasPrefix(to, "../") {
				t.Errorf("%s: link %q points outside the repository", from, dest)
				continue
			}
			info, err := os.Stat(filepath.Join(root, filepath.FromSlash(to)))
			if err != nil {
				t.Errorf("%s: link %q: %s does not exist", from, dest, to)
				continue
			}
			if anchor == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(to, ".md") {
				t.Errorf("%s: link %q: an anchor into %s, which is not a Markdown page", from, dest, to)
				continue
			}
			if d := doc(to); !d.anchors[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s (it has %s)", from, dest, to, anchor, sortedKeys(d.anchors))
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link in the README and docs/")
	}
}

// TestDocsAreAllLinkedFromTheReadme: a page of docs/ that the README does
// not link is a page a newcomer never finds.
func TestDocsAreAllLinkedFromTheReadme(t *testing.T) {
	t.Parallel()
	linked := map[string]bool{}
	for _, dest := range parseDoc(t, "README.md").links {
		target, _, _ := strings.Cut(dest, "#")
		linked[filepath.ToSlash(filepath.Clean(target))] = true
	}
	for _, d := range documents(t)[1:] {
		if !linked[d] {
			t.Errorf("README.md does not link %s", d)
		}
	}
}

// TestDocsStateTheirOwnRules: the README and docs/ state the rules they
// rely on themselves; none cites a specification that is not in the
// repository ("SPEC §2.4").
func TestDocsStateTheirOwnRules(t *testing.T) {
	t.Parallel()
	// The product's spec and its issue tracker live outside the
	// repository: a document says the rule, not where it was asked for.
	cite := regexp.MustCompile(`\bSPEC(\.md| ?§)|\b[Ii]ssues? \d+`)
	for _, path := range documents(t) {
		src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if m := cite.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which is not in the repository: say the rule here", path, i+1, m)
			}
		}
	}
}

func sortedKeys(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, "#"+k)
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

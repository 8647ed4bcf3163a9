package producer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommentsNameExistingFiles: a comment that points the reader to a file
// (see idempotence.go, the matrix of SPEC.md) must point to one that exists
// in this package or at the repository root; the repository does not ship
// the spec, so its rules live in DESIGN.md.
func TestCommentsNameExistingFiles(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	files = append(files, "DESIGN.md")
	ref := regexp.MustCompile(`\b[A-Za-z_][A-Za-z0-9_]*\.(?:go|md)\b`)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(raw), "\n") {
			c := strings.Index(line, "//")
			if f != "DESIGN.md" && c < 0 {
				continue
			}
			if c >= 0 {
				line = line[c:]
			}
			for _, name := range ref.FindAllString(line, -1) {
				checked++
				_, errHere := os.Stat(name)
				_, errRoot := os.Stat(filepath.Join("..", name))
				assert.True(t, errHere == nil || errRoot == nil, "%s:%d names %s, which does not exist", f, i+1, name)
			}
		}
	}
	require.NotZero(t, checked, "no file references found: the pattern is broken")
}

// TestDocCommentsNameTheirDeclaration: a doc comment on a top-level
// declaration starts with the name it documents, so a comment left above
// the wrong declaration (errNotIdempotent's above errNoBrokers) is caught.
func TestDocCommentsNameTheirDeclaration(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	checked := 0
	check := func(doc *ast.CommentGroup, name string, pos token.Pos) {
		if doc == nil || name == "_" {
			return
		}
		checked++
		first := strings.Fields(doc.Text())
		ok := len(first) > 0 && (first[0] == name || len(first) > 1 && (first[0] == "A" || first[0] == "An" || first[0] == "The") && first[1] == name)
		assert.True(t, ok, "%s: doc comment of %s starts %q", fset.Position(pos), name, strings.Join(first[:min(4, len(first))], " "))
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				check(d.Doc, d.Name.Name, d.Pos())
			case *ast.GenDecl:
				if d.Lparen.IsValid() {
					continue // grouped: comments describe the group
				}
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.ValueSpec:
						if len(sp.Names) == 1 {
							check(d.Doc, sp.Names[0].Name, sp.Pos())
						}
					case *ast.TypeSpec:
						check(d.Doc, sp.Name.Name, sp.Pos())
					}
				}
			}
		}
	}
	require.NotZero(t, checked)
}

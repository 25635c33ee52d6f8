package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the house's bound on a function outside tests, from its
// func line to its closing brace: a longer one is steps that want names.
const maxFuncLines = 80

// TestNoLongFunctions holds every function and function literal outside
// _test.go files to maxFuncLines, so the bound cannot come back unseen.
func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			name := "a func literal"
			switch x := n.(type) {
			case *ast.FuncDecl:
				body, name = x.Body, x.Name.Name
			case *ast.FuncLit:
				body = x.Body
			}
			if body == nil {
				return true
			}
			from, to := fset.Position(n.Pos()), fset.Position(body.End())
			if lines := to.Line - from.Line + 1; lines > maxFuncLines {
				rel, _ := filepath.Rel(repoRoot, from.Filename)
				t.Errorf("%s:%d: %s is %d lines, more than %d", rel, from.Line, name, lines, maxFuncLines)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files under %s, want the whole tree", checked, repoRoot)
	}
}

package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The README's events table lists every event the code emits: the names
// in this package, and every literal or constant given as "event" in a
// zerolog Str("event", …) anywhere in the module.
func TestREADMEListsEveryEvent(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "| event | when | fields |")
	if start < 0 {
		t.Fatal("README has no events table")
	}
	table := string(readme)[start:]
	table = table[:strings.Index(table, "\n\n")]

	// The operators' question "duplicates blocked per workspace today, by
	// mode" has its one query.
	if !strings.Contains(string(readme), `sum by (workspaceId, mode) (count_over_time({app="msgapi", event="`+DuplicateBlocked+`"} | json [24h]))`) {
		t.Error("the README's LogQL lacks duplicates blocked per workspace and mode")
	}

	names := emitted(t)
	if len(names) < 20 {
		t.Fatalf("found only %d event names: %v", len(names), names)
	}
	for _, n := range names {
		if !strings.Contains(table, "`"+n+"`") {
			t.Errorf("the README's events table lacks `%s`", n)
		}
	}
}

// emitted returns every event name in the module's non-test Go files.
func emitted(t *testing.T) []string {
	t.Helper()
	var names []string
	add := func(s string) {
		if strings.Contains(s, ".") && !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		consts := map[string]string{} // this file's string constants
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, v := range vs.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							val, _ := strconv.Unquote(lit.Value)
							consts[vs.Names[i].Name] = val
							if filepath.Base(filepath.Dir(path)) == "events" && f.Name.Name == "events" {
								add(val) // every name in this package
							}
						}
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Str" {
				return true
			}
			if k, ok := call.Args[0].(*ast.BasicLit); !ok || k.Value != `"event"` {
				return true
			}
			switch v := call.Args[1].(type) {
			case *ast.BasicLit:
				s, _ := strconv.Unquote(v.Value)
				add(s)
			case *ast.Ident:
				if s, ok := consts[v.Name]; ok {
					add(s)
				} else if s, ok := packageConst(t, filepath.Dir(path), v.Name); ok {
					add(s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// packageConst finds a string constant declared in another file of dir.
func packageConst(t *testing.T, dir, name string) (string, bool) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if o := f.Scope.Lookup(name); o != nil && o.Kind == ast.Con {
			if vs, ok := o.Decl.(*ast.ValueSpec); ok {
				for i, n := range vs.Names {
					if n.Name == name && i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
							s, _ := strconv.Unquote(lit.Value)
							return s, true
						}
					}
				}
			}
		}
	}
	return "", false
}

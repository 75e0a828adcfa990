package style

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MaxFuncLines is the most lines a function of the module may span.
const MaxFuncLines = 80

// TestFuncLength fails on every non-test, non-generated function of the
// module longer than MaxFuncLines: a function that long is several
// functions, its parts named steps.
func TestFuncLength(t *testing.T) {
	long, err := longFuncs(moduleRoot(t), MaxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range long {
		t.Errorf("%s: split it into named steps of at most %d lines", f, MaxFuncLines)
	}
}

// TestLongFuncsFindsOnlyTheLongOne: in a package written for the test, a
// function of MaxFuncLines+1 lines is reported, and one of exactly
// MaxFuncLines, a test file's and a generated file's are not.
func TestLongFuncsFindsOnlyTheLongOne(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"long.go":      "package long\n\n" + funcOf("tooLong", MaxFuncLines+1) + "\n" + funcOf("justFits", MaxFuncLines),
		"long_test.go": "package long\n\n" + funcOf("testLong", MaxFuncLines+1),
		"gen.go":       "// Code generated for the test. DO NOT EDIT.\n\npackage long\n\n" + funcOf("generatedLong", MaxFuncLines+1),
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long, err := longFuncs(dir, MaxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("long.go:3: tooLong is %d lines", MaxFuncLines+1)
	if len(long) != 1 || long[0].String() != want {
		t.Errorf("longFuncs(%v) = %v, want [%s]", files, long, want)
	}
}

// funcOf is the source of a function called name that spans n lines.
func funcOf(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "func %s() {\n", name)
	for i := range n - 2 {
		fmt.Fprintf(&b, "\t_ = %d\n", i)
	}
	b.WriteString("}\n")
	return b.String()
}

// funcSpan is a function and the lines it spans.
type funcSpan struct {
	file  string
	line  int
	name  string
	lines int
}

func (f funcSpan) String() string {
	return fmt.Sprintf("%s:%d: %s is %d lines", f.file, f.line, f.name, f.lines)
}

// longFuncs returns the functions and methods longer than max lines in the
// .go files beneath root, skipping test files, generated files (those with
// the "Code generated … DO NOT EDIT." line) and testdata, vendor and
// hidden directories (when walked into, not root itself). File names are
// relative to root.
func longFuncs(root string, max int) ([]funcSpan, error) {
	var long []funcSpan
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", path, err)
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		long = append(long, longIn(fset, f, filepath.ToSlash(rel), max)...)
		return nil
	})
	return long, err
}

// longIn returns the functions of f longer than max lines.
func longIn(fset *token.FileSet, f *ast.File, name string, max int) []funcSpan {
	var long []funcSpan
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > max {
			long = append(long, funcSpan{file: name, line: start, name: funcName(fn), lines: n})
		}
	}
	return long
}

// funcName is fn's name, with its receiver's type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok {
		typ = g.X
	}
	if g, ok := typ.(*ast.IndexListExpr); ok {
		typ = g.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// skipDir reports whether a directory holds no code of the module's own:
// fixtures, vendored code, hidden directories and those the go command
// ignores.
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// moduleRoot returns the directory of the module being tested; it skips the
// test without the go command.
func moduleRoot(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: the go command is not on PATH, so the module's directory cannot be found")
	}
	out, err := exec.Command(gobin, "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

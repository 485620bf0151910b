package concurkit_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/chaos"
	"github.com/concurkit/concurkit/deadlock"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/outbox"
)

// The module's vocabulary (see the package doc): these tests read every
// public package's source and fail on a name that breaks it, so a new
// ErrNilFoo, a second name for a handle interface or a driver-suffixed
// function is caught in review's place.

// badInput lists every exported sentinel whose name says "invalid"; each must
// match concurkit.ErrInvalidArgument. A new ErrInvalidXxx anywhere fails
// TestBadInputSentinels until it is added here (and matches).
var badInput = map[string]error{
	"concurkit.ErrInvalidArgument": concurkit.ErrInvalidArgument,
	"distlock.ErrInvalidKey":       distlock.ErrInvalidKey,
	"fenced.ErrInvalidToken":       fenced.ErrInvalidToken,
	"deadlock.ErrInvalidMode":      deadlock.ErrInvalidMode,
	"deadlock.ErrInvalidWorkload":  deadlock.ErrInvalidWorkload,
	"idempotency.ErrInvalidKey":    idempotency.ErrInvalidKey,
	"inbox.ErrInvalidID":           inbox.ErrInvalidID,
	"outbox.ErrInvalidMessage":     outbox.ErrInvalidMessage,
	"chaos.ErrInvalidConfig":       chaos.ErrInvalidConfig,
}

// handleNames maps the internal handle interfaces to the one exported name
// each adapter gives them.
var handleNames = map[string]string{
	"pgxdb.DBTX":           "DBTX",
	"sqldb.DBTX":           "DBTX",
	"pgxdb.Beginner":       "Beginner",
	"pgxdb.TxBeginner":     "Beginner",
	"sqldb.Beginner":       "Beginner",
	"dynamoapi.Updater":    "Client",
	"dynamoapi.PutUpdater": "Client",

	"dynamoapi.UpdateScanDeleter": "Client",
}

// retiredNames are second names for a handle that the module no longer uses.
var retiredNames = []string{"SQLDB", "SQLDBTX", "SQLBeginner", "Pool", "API", "DynamoDBClient", "DynamoDBPutter", "DynamoDBUpdater"}

// tableFields are the only field names a Table struct may have.
var tableFields = []string{"Schema", "Name", "KeyColumn", "VersionColumn", "TokenColumn", "ValueColumn", "ShardColumn"}

// publicFile is one parsed non-test source file of a public package.
type publicFile struct {
	pkg  string // import path relative to the module, "" for the root
	name string // package name
	file *ast.File
}

func publicFiles(t *testing.T) []publicFile {
	t.Helper()
	var out []publicFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "internal", "testdata", ".git", "cmd", "scripts", "docs":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			dir = ""
		}
		out = append(out, publicFile{pkg: dir, name: f.Name.Name, file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("found only %d public source files: is the test running at the module root?", len(out))
	}
	return out
}

// isTestKit reports whether pkg is a package for tests or tools, whose
// helpers are named after the servers they start (testkit.Postgres).
func isTestKit(pkg string) bool {
	return pkg == "testkit" || strings.HasSuffix(pkg, "test") || strings.HasPrefix(pkg, "bench")
}

func TestBadInputSentinels(t *testing.T) {
	for name, err := range badInput {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s (%v) does not match concurkit.ErrInvalidArgument", name, err)
		}
	}
	invalid := regexp.MustCompile(`^Err(Invalid|Nil|Bad)`)
	for _, pf := range publicFiles(t) {
		for _, d := range pf.file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if !n.IsExported() || !invalid.MatchString(n.Name) {
						continue
					}
					q := pf.name + "." + n.Name
					switch {
					case strings.HasPrefix(n.Name, "ErrNil"):
						t.Errorf("%s (%s): a nil handle is bad input: return an error matching concurkit.ErrInvalidArgument, no ErrNil sentinel", q, pf.pkg)
					case pf.pkg != "" && n.Name == "ErrInvalidArgument":
						t.Errorf("%s (%s): the module has one ErrInvalidArgument, in package concurkit", q, pf.pkg)
					case badInput[q] == nil:
						t.Errorf("%s (%s): a new bad-input sentinel: make it with concurkit.InvalidArgumentError and list it in badInput", q, pf.pkg)
					}
				}
			}
		}
	}
}

func TestHandleNames(t *testing.T) {
	for _, pf := range publicFiles(t) {
		for _, d := range pf.file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if !ts.Name.IsExported() {
					continue
				}
				if slices.Contains(retiredNames, ts.Name.Name) && !isTestKit(pf.pkg) {
					t.Errorf("%s.%s (%s): a retired handle name; use DBTX, Beginner or Client", pf.name, ts.Name.Name, pf.pkg)
				}
				sel, ok := ts.Type.(*ast.SelectorExpr)
				if !ok || ts.Assign == 0 {
					continue
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					continue
				}
				want, known := handleNames[x.Name+"."+sel.Sel.Name]
				if known && ts.Name.Name != want {
					t.Errorf("%s.%s = %s.%s (%s): this handle is called %s everywhere", pf.name, ts.Name.Name, x.Name, sel.Sel.Name, pf.pkg, want)
				}
			}
		}
	}
}

func TestNoDriverSuffixes(t *testing.T) {
	suffix := regexp.MustCompile(`(Postgres|MySQL|DynamoDB)$`)
	for _, pf := range publicFiles(t) {
		if isTestKit(pf.pkg) {
			continue
		}
		for _, d := range pf.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() || !suffix.MatchString(fd.Name.Name) {
				continue
			}
			t.Errorf("%s.%s (%s): the driver is the package (…pg, …mysql, …dynamo), not a name suffix", pf.name, fd.Name.Name, pf.pkg)
		}
	}
}

func TestTableFields(t *testing.T) {
	for _, pf := range publicFiles(t) {
		ast.Inspect(pf.file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Table" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, f := range st.Fields.List {
				for _, name := range f.Names {
					if name.IsExported() && !slices.Contains(tableFields, name.Name) {
						t.Errorf("%s.Table.%s (%s): Table fields are %v", pf.name, name.Name, pf.pkg, tableFields)
					}
				}
			}
			return false
		})
	}
}

// TestLockerConstructors: every lock backend is built the same way,
// New(client, *Config) (*Locker, error). The recipes built on a Locker
// (their New takes a distlock.Locker first) are not backends.
func TestLockerConstructors(t *testing.T) {
	backends := 0
	for _, pf := range publicFiles(t) {
		if !strings.HasPrefix(pf.pkg, "distlock/") || isTestKit(pf.pkg) {
			continue
		}
		for _, d := range pf.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != "New" {
				continue
			}
			params, results := fd.Type.Params.List, fd.Type.Results
			var shape []string
			for _, p := range params {
				for range max(len(p.Names), 1) {
					shape = append(shape, exprString(p.Type))
				}
			}
			if len(shape) > 0 && shape[0] == "distlock.Locker" {
				continue // a recipe (election, semaphore…) built on any backend, not a backend
			}
			backends++
			var res []string
			if results != nil {
				for _, r := range results.List {
					res = append(res, exprString(r.Type))
				}
			}
			if len(shape) != 2 || shape[1] != "*Config" || !slices.Equal(res, []string{"*Locker", "error"}) {
				t.Errorf("%s.New(%s) (%s): want New(client, *Config) (*Locker, error)", pf.name, strings.Join(shape, ", ")+") ("+strings.Join(res, ", "), pf.pkg)
			}
		}
	}
	if backends < 6 {
		t.Errorf("found %d lock backends with New, want 6", backends)
	}
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.IndexExpr:
		return exprString(e.X) + "[" + exprString(e.Index) + "]"
	}
	return "?"
}

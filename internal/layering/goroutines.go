package layering

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// GoSite is a go statement in the module's code (test files excluded), or
// a call that starts a goroutine for its function literal
// (sync.WaitGroup.Go, errgroup.Group.Go):
// its file below the module, the function declaration it is in
// ("Type.Method" or "Func", function literals included) and its line.
type GoSite struct {
	File string
	Func string
	Line int
}

func (s GoSite) String() string { return fmt.Sprintf("%s:%d (in %s)", s.File, s.Line, s.Func) }

// Goroutine is the place where go statements are allowed: a file and a
// function in it (every go statement of the function is allowed), and why
// what it starts is not a worker of the runner or a job.
type Goroutine struct {
	File string
	Func string
	Why  string
}

// FindGo returns the go statements of the Go files below root's dirs,
// test files (_test.go) and testdata directories excepted, in file and
// line order.
func FindGo(root string, dirs ...string) ([]GoSite, error) {
	var out []GoSite
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
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
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, goStatements(fset, filepath.ToSlash(rel), f)...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("layering: %w", err)
		}
	}
	return out, nil
}

// goStatements returns f's go statements, each with the function it is in
// ("package level" for a function literal in a variable's initializer).
func goStatements(fset *token.FileSet, file string, f *ast.File) []GoSite {
	var out []GoSite
	for _, decl := range f.Decls {
		name := "package level"
		if fd, ok := decl.(*ast.FuncDecl); ok {
			name = fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				name = recvType(fd.Recv.List[0].Type) + "." + name
			}
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			if _, isGo := n.(*ast.GoStmt); isGo || spawns(n) {
				out = append(out, GoSite{File: file, Func: name, Line: fset.Position(n.Pos()).Line})
			}
			return true
		})
	}
	return out
}

// spawns reports whether n is a call that starts a goroutine the way
// sync.WaitGroup.Go and errgroup.Group.Go do: X.Go(func() …{…}), one
// function literal as the only argument. (The runner's Go takes a name,
// a worker and options, and is not one.)
func spawns(n ast.Node) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Go" || len(call.Args) != 1 {
		return false
	}
	_, lit := call.Args[0].(*ast.FuncLit)
	return lit
}

// recvType is a receiver's type name without pointer or type parameters.
func recvType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return "?"
		}
	}
}

// CheckGo returns the go statements found that no entry of allowed
// covers, and the entries that cover none (stale: remove them).
func CheckGo(found []GoSite, allowed []Goroutine) (unlisted []GoSite, stale []Goroutine) {
	used := make([]bool, len(allowed))
	for _, s := range found {
		i := slices.IndexFunc(allowed, func(g Goroutine) bool { return g.File == s.File && g.Func == s.Func })
		if i < 0 {
			unlisted = append(unlisted, s)
			continue
		}
		used[i] = true
	}
	for i, g := range allowed {
		if !used[i] {
			stale = append(stale, g)
		}
	}
	return unlisted, stale
}

// WeftGoroutines returns the places in weft's code (test files excepted)
// where a go statement is allowed, and why. Long-lived work is a worker
// of its process's runner or the job engine's; any other goroutine must
// belong to one call — a request, a connection, a fan-out, a shutdown —
// and end with it, or belong to a test fixture or a tool process that has
// no runner. docs/architecture.md prints this list (regenerate with `go
// test ./internal/layering -update`); TestGoroutines fails on a go
// statement not listed here, and on an entry that covers none.
func WeftGoroutines() []Goroutine {
	return []Goroutine{
		// The runner and the job engine: what runs long-lived work.
		{File: "internal/runner/runner.go", Func: "Runner.Go", Why: "the worker's own goroutine; Stop cancels and waits for it"},
		{File: "internal/job/engine.go", Func: "Engine.Start", Why: "the job engine's life on this node (director, campaign); Stop cancels and waits"},
		{File: "internal/job/engine.go", Func: "Engine.life", Why: "the director and the coordinator campaign of one lease; life waits for both before a new lease"},
		{File: "internal/job/director.go", Func: "director.retire", Why: "waits for a stopped job manager's workers to release their tasks, then forgets it; the director waits for these before it returns"},
		{File: "internal/job/manager.go", Func: "manager.start", Why: "one manager per running job on this node; stop cancels and waits"},
		{File: "internal/job/manager.go", Func: "manager.run", Why: "the job's workers on this node, as many as the throttle gives it; run waits for them"},

		// Servers: per-connection and per-request goroutines, owned by
		// the worker whose step serves the listener.
		{File: "internal/gateway/nfs/server.go", Func: "Server.Serve", Why: "one per client connection, at most Config.MaxConns (--nfs-max-connections); Serve (the `nfs ADDR` worker's step) closes them and waits when it returns"},
		{File: "internal/gateway/nfs/rpc.go", Func: "Server.serveConn", Why: "one per RPC in progress, at most 16 per connection (a slow COMMIT does not hold up READs); serveConn waits for them"},
		{File: "internal/gateway/fuse/locks.go", Func: "rawFS.setLk", Why: "a blocking lock wait's watch of the kernel's interrupt; ends with the request"},
		{File: "internal/gateway/fuse/mount.go", Func: "New", Why: "go-fuse's request loop, which must run before WaitMount; the mount's `fuse` worker waits for it to end"},
		{File: "internal/server/server.go", Func: "Server.shutdown", Why: "gRPC's GracefulStop, cut short by the shutdown's deadline"},

		// Fan-outs within one call, each waited for.
		{File: "internal/admin/asknodes.go", Func: "askNodes", Why: "one admin request asking every node at once, each within nodeAskTimeout"},
		{File: "internal/etcdx/status.go", Func: "AskStatus", Why: "one call asking every etcd member for its status at once, each within the caller's timeout, and waiting for all: `weft status` (1.5 s) and a step of the `etcd-steer` worker (1 s)"},
		{File: "internal/client/stripe_read.go", Func: "inode.fetch", Why: "the units of one stripe read at once"},
		{File: "internal/client/stripe_write.go", Func: "inode.placeAndPut", Why: "the units of one stripe written at once"},
		{File: "internal/client/client.go", Func: "Client.goBackground", Why: "read-ahead, strided prefetch and write-behind of one stripe or record, bounded by the client's semaphores; Close waits for them"},
		{File: "internal/restripe/units.go", Func: "Restriper.readUnits", Why: "the units of one stripe read at once"},
		{File: "internal/restripe/units.go", Func: "Restriper.putUnits", Why: "the units of one stripe written at once"},
		{File: "internal/restripe/verify.go", Func: "Restriper.checkStripe", Why: "the units of one stripe checked at once"},
		{File: "internal/jobs/fsck_layout.go", Func: "fsckStripes.checkUnits", Why: "the units of one stripe asked for their headers at once"},
		{File: "internal/bench/run.go", Func: "parallel", Why: "a benchmark's tasks (an errgroup), run at once and waited for; their context ends when one fails or the caller's does"},

		// Tool processes with no runner: the local cluster's launcher
		// and the bench command.
		{File: "internal/local/inprocess.go", Func: "InProcess.Node", Why: "an in-process node of `weft local`/tests: the node itself, whose own work is in its runner"},
		{File: "internal/local/inprocess.go", Func: "InProcess.Mount", Why: "an in-process mount, likewise"},
		{File: "internal/local/inprocess.go", Func: "inProc.Kill", Why: "crashes an in-process node without holding up the caller"},
		{File: "internal/local/launcher.go", Func: "Exec.start", Why: "reaps a launched node or mount process when it exits"},
		{File: "internal/local/supervisor.go", Func: "supervisor.trackLocked", Why: "reports a launched process's end"},
		{File: "internal/local/supervisor.go", Func: "supervisor.serveControl", Why: "`weft local`'s control socket, closed when the cluster stops"},
		{File: "cmd/weft/bench_cmd.go", Func: "newBenchCmd", Why: "`weft bench loopback` waits for its FUSE server while watching for Ctrl-C"},

		// Test fixtures (packages under */*test and tests/harness).
		{File: "internal/client/clienttest/fixture.go", Func: "New", Why: "test fixture"},
		{File: "internal/etcdx/etcdtest/etcdtest.go", Func: "tryCluster", Why: "test fixture"},
		{File: "internal/kv/kvtest/kvtest.go", Func: "testConcurrentIncrements", Why: "conformance test's concurrent clients"},
		{File: "internal/kv/kvtest/kvtest.go", Func: "testWriteSkew", Why: "conformance test's concurrent clients"},
		{File: "internal/gateway/nfs/nfstest/fixture.go", Func: "Fixture.Start", Why: "test fixture's gateway"},
		{File: "tests/harness/harness.go", Func: "Cluster.startProcess", Why: "test harness: reaps a node process"},
		{File: "tests/harness/harness.go", Func: "Cluster.startInProcess", Why: "test harness: an in-process node"},
		{File: "tests/harness/mount_proc.go", Func: "Cluster.StartMount", Why: "test harness: reaps a mount process"},
	}
}

// GoroutinesMarkdown renders WeftGoroutines for docs/architecture.md.
func GoroutinesMarkdown(gs []Goroutine) string {
	var b strings.Builder
	b.WriteString("<!-- Generated from internal/layering/goroutines.go by `go test ./internal/layering -update`; do not edit by hand. -->\n\n")
	b.WriteString("| file | function | why not a worker |\n| --- | --- | --- |\n")
	for _, g := range gs {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", g.File, g.Func, g.Why)
	}
	return b.String()
}

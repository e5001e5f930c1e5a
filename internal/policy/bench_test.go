package policy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// benchPolicy returns a policy of 50 rules of the kinds administrators
// write: placement by name, path and owner; migrations by age; deletions
// and lists.
func benchPolicy(tb testing.TB) *Policy {
	var b strings.Builder
	b.WriteString("DEFINE(age, CURRENT_TIMESTAMP - ACCESS_TIME)\n")
	b.WriteString("DEFINE(is_tmp, NAME LIKE '%.tmp' OR NAME LIKE '%~' OR PATH_NAME LIKE '/tmp/%')\n")
	exts := []string{"tar", "gz", "zst", "iso", "img", "mp4", "mkv", "bam", "fastq", "h5", "nc", "parquet"}
	for i, e := range exts {
		fmt.Fprintf(&b, "RULE 'ext-%s' SET POOL 'capacity' PROTECTION 'ec:8+2' WHERE LOWER(NAME) LIKE '%%.%s' AND USER_ID <> %d\n", e, e, i)
	}
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "RULE 'proj-%d' SET POOL 'fast' WHERE PATH_NAME LIKE '/projects/p%d/%%' AND GROUP_ID IN (%d, %d, %d)\n", i, i, i, i+100, i+200)
	}
	b.WriteString("RULE 'db' SET POOL 'fast' PROTECTION 'mirror:3' WHERE NAME LIKE '%.db' OR NAME LIKE '%.sqlite'\n")
	b.WriteString("RULE 'logs' SET POOL 'capacity' WHERE PATH_NAME LIKE '/var/log/%' OR NAME LIKE '%.log'\n")
	b.WriteString("RULE 'default' SET POOL 'fast'\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "RULE 'cold-%d' MIGRATE FROM POOL 'fast' THRESHOLD(80,60) WEIGHT(DAYS(age) * KB_ALLOCATED) TO POOL 'capacity' WHERE age > INTERVAL '%d' DAYS AND FILE_SIZE > %dM AND PATH_NAME LIKE '/projects/p%d/%%'\n", i, 7+i, i, i)
	}
	b.WriteString("RULE 'warm' MIGRATE FROM POOL 'capacity' TO POOL 'fast' LIMIT(90) WHERE age < INTERVAL '1' HOURS AND XATTR('user.pin') IS NULL\n")
	b.WriteString("RULE 'archive' MIGRATE FROM POOL 'capacity' TO POOL 'archive' WHERE DAYS(CURRENT_TIMESTAMP - MODIFICATION_TIME) > 365 AND MODE LIKE '-%'\n")
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&b, "RULE 'del-%d' DELETE WHERE is_tmp AND MODIFICATION_TIME < CURRENT_TIMESTAMP - INTERVAL '%d' DAYS AND USER_ID = %d\n", i, 30+i, 1000+i)
	}
	b.WriteString("RULE 'scratch' DELETE WHERE PATH_NAME LIKE '/scratch/%' AND CURRENT_TIMESTAMP - MODIFICATION_TIME > INTERVAL '30' DAYS\n")
	b.WriteString("RULE 'big' LIST 'big' WHERE KB_ALLOCATED > 1048576\n")
	b.WriteString("RULE 'orphans' LIST 'orphans' WHERE NLINK = 0 OR USER_ID NOT BETWEEN 0 AND 65535\n")
	b.WriteString("RULE 'world' LIST 'world-writable' WHERE MODE LIKE '________w_'\n")
	b.WriteString("RULE 'tier' LIST 'tagged' WHERE XATTR('user.tier') IN ('hot', 'cold')\n")
	p, err := Parse(b.String(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if n := len(p.Rules()); n != 50 {
		tb.Fatalf("%d rules", n)
	}
	return p
}

// benchFiles returns n files with attributes spread over the rules.
func benchFiles(n int, now time.Time) []File {
	r := rand.New(rand.NewPCG(1, 1))
	exts := []string{"tar", "gz", "txt", "c", "h", "db", "tmp", "fastq", "log", "json"}
	xattr := func(name string) (string, bool) {
		if name == "user.tier" {
			return "hot", true
		}
		return "", false
	}
	files := make([]File, n)
	for i := range files {
		path := fmt.Sprintf("/projects/p%d/d%d/f%d.%s", r.IntN(20), r.IntN(100), i, exts[r.IntN(len(exts))])
		if r.IntN(10) == 0 {
			path = fmt.Sprintf("/tmp/f%d.%s", i, exts[r.IntN(len(exts))])
		}
		size := int64(r.ExpFloat64() * 50e6)
		files[i] = File{
			Known: AttrsAll, Path: path, Size: size, Allocated: size * 3 / 2,
			Access: now.Add(-time.Duration(r.IntN(60*24)) * time.Hour),
			Modify: now.Add(-time.Duration(r.IntN(500*24)) * time.Hour),
			UID:    uint32(1000 + r.IntN(10)), GID: uint32(r.IntN(300)), Mode: 0o100644, Nlink: 1,
			Pool: []string{"fast", "capacity"}[r.IntN(2)], Protection: "ec:4+2", Xattr: xattr,
		}
	}
	return files
}

// BenchmarkEvaluate evaluates all the rules of a 50-rule policy on a file
// (Matching, then Weight of the matching MIGRATE rules): the tier job's
// scan. It reports files/s; one iteration is one file.
func BenchmarkEvaluate(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	p := benchPolicy(b)
	files := benchFiles(10000, now)
	matches := 0
	var m []*Rule
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		f := files[i%len(files)]
		m = p.Matching(f, now, m[:0])
		for _, r := range m {
			if r.Kind() == KindMigrate {
				r.Weight(f, now)
			}
		}
		matches += len(m)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
	b.ReportMetric(float64(matches)/float64(b.N), "matches/file")
}

// BenchmarkEvaluateByRule is BenchmarkEvaluate asking each rule's Match
// in turn, which evaluates the file once per rule.
func BenchmarkEvaluateByRule(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	p := benchPolicy(b)
	rules := p.Rules()
	files := benchFiles(10000, now)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		f := files[i%len(files)]
		for _, r := range rules {
			if r.Match(f, now) && r.Kind() == KindMigrate {
				r.Weight(f, now)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
}

// BenchmarkPlace is placement at creation: the first SET POOL rule of the
// 50 that matches, with only the creation attributes known.
func BenchmarkPlace(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	p := benchPolicy(b)
	files := benchFiles(10000, now)
	for i := range files {
		files[i].Known = AttrsAtCreate
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.Place(files[i%len(files)], now)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
}

// BenchmarkParse parses the 50-rule policy.
func BenchmarkParse(b *testing.B) {
	src := benchPolicy(b).String()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Parse(src, nil); err != nil {
			b.Fatal(err)
		}
	}
}

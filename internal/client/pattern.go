package client

// access is what a handle's reads look like to the readahead.
type access int

const (
	// accessRandom: no pattern; nothing is prefetched.
	accessRandom access = iota
	// accessSequential: each read continues the previous one; whole
	// stripes are read ahead.
	accessSequential
	// accessStrided: reads of about the same size at a constant distance
	// (a stride) greater than their size, as when N tasks read records
	// interleaved in one shared file; the next records are prefetched,
	// not the stripes between them.
	accessStrided
)

func (a access) String() string {
	switch a {
	case accessSequential:
		return "sequential"
	case accessStrided:
		return "strided"
	}
	return "random"
}

// pageSlack is how far a strided read may start from where the stride
// puts it: the kernel sends FUSE reads in whole pages, so the reads of
// records that are not page-aligned start up to a page before the record
// and their distances alternate between two page counts.
const pageSlack = 4096

// strideHits is how many consecutive reads must repeat a stride (after
// the read that starts it) before prefetching follows it: two, so that
// two reads that happen to be a gap apart are not taken for a pattern.
const strideHits = 2

// seqSlack is how far behind or ahead of the previous read's end a read
// may start and still continue a sequential stream: the kernel's
// readahead sends a file's reads to FUSE asynchronously, several at a
// time, and they may reach the client in any order.
const seqSlack = 2 << 20

// readPattern follows one handle's reads and classifies each: sequential,
// strided (with its stride) or random. It is not safe for concurrent use
// (File guards it with its mu).
type readPattern struct {
	reads  int   // reads seen
	last   int64 // start of the previous read
	next   int64 // end of the furthest read of the current run
	streak int   // consecutive sequential reads
	// A strided run: the read that started it, the reads since, and the
	// stride between the starts of consecutive reads (its mean over the
	// run, which pages round).
	runStart int64
	runReads int
	stride   int64
	// slack is how far the run's reads strayed from where the stride put
	// them (at most pageSlack): a prefetched record is widened by it.
	slack int64
	// strided: the handle has read strided; streakBytes: the bytes of the
	// current sequential streak. Once strided, a handle's reads are
	// taken for sequential only after a whole stripe of them (see
	// stripeReadahead): the kernel's readahead turns a strided reader's
	// reads into short sequential runs where the tasks' records meet in
	// its page cache.
	strided     bool
	streakBytes int64
}

// stripeReadahead reports whether a sequential streak should get whole
// stripes of ss bytes read ahead.
func (p *readPattern) stripeReadahead(ss int64) bool {
	return !p.strided || p.streakBytes >= ss
}

// observe records a read of n bytes at off and says what the handle's
// reads look like now: sequential (the read continues a sequential run),
// strided with the run's stride, or random. A read that breaks a pattern
// is random, and starts looking for a new one.
func (p *readPattern) observe(off int64, n int) (access, int64) {
	p.reads++
	first := p.reads == 1
	last, next := p.last, p.next
	p.last = off
	end := off + int64(n)
	if first {
		p.next = end
		return accessRandom, 0
	}
	// A strided run first: its reads are a gap apart, which a loose
	// sequential test would take for reordered sequential reads.
	d := off - last
	switch want := p.runStart + int64(p.runReads+1)*p.stride; {
	case p.runReads > 0 && d > int64(n) && abs(off-want) <= pageSlack:
		p.slack = max(p.slack, abs(off-want))
		p.runReads++
		p.stride = (off - p.runStart) / int64(p.runReads)
	case d > int64(n):
		// A new candidate stride: from the previous read to this one.
		p.runStart, p.runReads, p.stride, p.slack = last, 1, d, 0
	default:
		// Backwards, or overlapping or touching the previous read.
		p.runReads = 0
	}
	if p.runReads >= strideHits {
		p.strided = true
		p.streak, p.streakBytes = 0, 0
		p.next = end
		return accessStrided, p.stride
	}
	// Sequential: the read starts where the previous ones ended or, once
	// a stream is going, near there (out of order).
	if off > 0 && (off == next || (p.streak > 0 && off >= next-seqSlack && off <= next+seqSlack)) {
		p.streak++
		p.streakBytes += int64(n)
		p.next = max(next, end)
		return accessSequential, 0
	}
	p.streak, p.streakBytes = 0, 0
	p.next = end
	return accessRandom, 0
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

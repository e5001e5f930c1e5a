package qos

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid: a QoS specification or record that cannot be used; the
// message names the token and the accepted forms.
var ErrInvalid = errors.New("qos: invalid")

// ErrNewerFormat: the stored configuration was written by a newer weft.
var ErrNewerFormat = errors.New("qos: record of a newer format")

// AllPools is the pool name of the default limits: they apply to every
// pool that has no limit of its own for the class.
const AllPools = "*"

// Limit is a limit of one class in one pool: IOPS (operations per second)
// and BytesPerSec, each 0 for no limit on that axis. The zero Limit is
// "unlimited", stored explicitly so that a pool can lift a default.
type Limit struct {
	IOPS        float64 `json:"iops,omitempty"`
	BytesPerSec float64 `json:"bytes_per_sec,omitempty"`
}

// Unlimited reports whether l limits nothing.
func (l Limit) Unlimited() bool { return l.IOPS <= 0 && l.BytesPerSec <= 0 }

// String is the limit as the administrator writes it: "unlimited",
// "300IOPS", "100MB/s" or both joined by "+".
func (l Limit) String() string {
	var parts []string
	if l.IOPS > 0 {
		parts = append(parts, strconv.FormatFloat(l.IOPS, 'f', -1, 64)+"IOPS")
	}
	if l.BytesPerSec > 0 {
		parts = append(parts, strconv.FormatFloat(l.BytesPerSec/1e6, 'f', -1, 64)+"MB/s")
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, "+")
}

// PoolLimits are the limits of one pool (or of AllPools) by class; a
// class that is absent takes the default (AllPools), or none.
type PoolLimits map[Class]Limit

// ConfigVersion is the "v" of the Config records this binary writes and
// the newest it reads.
const ConfigVersion = 1

// Config is the cluster's QoS configuration, one durable record (see
// package cluster for its key). Version counts the changes; Enabled
// switches enforcement and nothing else (statistics are always kept).
// Pools holds the limits by pool name and AllPools. A limit is for the
// whole cluster: each node enforces its share (Share).
type Config struct {
	V       int                   `json:"v"`
	Version uint64                `json:"version"`
	Enabled bool                  `json:"enabled"`
	Pools   map[string]PoolLimits `json:"pools,omitempty"`
	Updated time.Time             `json:"updated,omitzero"`
	By      string                `json:"by,omitempty"`
}

// Resolve returns the limit of class c in pool: the pool's own, else the
// AllPools default, else unlimited. It ignores Enabled.
func (c Config) Resolve(pool string, class Class) Limit {
	if l, ok := c.Pools[pool][class]; ok {
		return l
	}
	return c.Pools[AllPools][class]
}

// Limits reports whether the configuration, if enabled, limits class c in
// any pool.
func (c Config) Limits(class Class) bool {
	if !c.Enabled {
		return false
	}
	for _, pl := range c.Pools {
		if l, ok := pl[class]; ok && !l.Unlimited() {
			return true
		}
	}
	return false
}

// Specs returns the limits as the administrator writes them, one
// "pool=NAME,class=LIMIT,..." per pool, named pools first in name order,
// AllPools last.
func (c Config) Specs() []string {
	names := slices.Sorted(maps.Keys(c.Pools))
	if i := slices.Index(names, AllPools); i >= 0 {
		names = append(slices.Delete(names, i, i+1), AllPools)
	}
	var out []string
	for _, n := range names {
		parts := []string{"pool=" + n}
		for _, cl := range Classes() {
			if l, ok := c.Pools[n][cl]; ok {
				parts = append(parts, string(cl)+"="+l.String())
			}
		}
		out = append(out, strings.Join(parts, ","))
	}
	return out
}

// Merge returns c with the limits of set applied: each class named for a
// pool replaces that class's limit in that pool; other pools and classes
// keep theirs. With replace, c's limits are dropped first. Enabled,
// Version and the rest are c's.
func (c Config) Merge(set map[string]PoolLimits, replace bool) Config {
	out := c
	out.Pools = map[string]PoolLimits{}
	if !replace {
		for p, pl := range c.Pools {
			out.Pools[p] = maps.Clone(pl)
		}
	}
	for p, pl := range set {
		if out.Pools[p] == nil {
			out.Pools[p] = PoolLimits{}
		}
		maps.Copy(out.Pools[p], pl)
	}
	return out
}

// Encode returns the stored form of c, with V set to ConfigVersion.
func Encode(c Config) []byte {
	c.V = ConfigVersion
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // a Config always marshals
	}
	return b
}

// Decode reads a stored Config. Errors: ErrNewerFormat for a record of a
// newer version (upgrade this node), ErrInvalid for one that does not
// decode or holds an unknown class or a negative limit.
func Decode(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%w: QoS record: %v", ErrInvalid, err)
	}
	if c.V > ConfigVersion {
		return Config{}, fmt.Errorf("%w: QoS record version %d, this weft reads up to %d: upgrade weft on this node", ErrNewerFormat, c.V, ConfigVersion)
	}
	for p, pl := range c.Pools {
		for cl, l := range pl {
			if !cl.Valid() || l.IOPS < 0 || l.BytesPerSec < 0 || math.IsNaN(l.IOPS) || math.IsNaN(l.BytesPerSec) {
				return Config{}, fmt.Errorf("%w: QoS record: pool %s class %q limit %+v", ErrInvalid, p, cl, l)
			}
		}
	}
	return c, nil
}

// The forms Parse accepts, for its errors and the command's help.
const (
	specForm  = `pool=NAME|*,CLASS=LIMIT[,CLASS=LIMIT...]`
	limitForm = `unlimited (or inf), NIOPS, N followed by KB/s, MB/s, GB/s, KiB/s, MiB/s or GiB/s, or both joined by + (300IOPS+100MB/s)`
	classForm = `other, maintenance or misc`
)

// Parse reads the administrator's limit specifications, each
// "pool=NAME,CLASS=LIMIT,..." (NAME "*" for the default of every pool;
// CLASS other, maintenance or misc; LIMIT as limitForm says). A pool named
// twice merges; a class named twice in one pool is an error. Errors wrap
// ErrInvalid and name the token and the forms accepted.
func Parse(specs []string) (map[string]PoolLimits, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no limits given: want one or more %s", ErrInvalid, specForm)
	}
	out := map[string]PoolLimits{}
	for _, spec := range specs {
		toks := strings.Split(spec, ",")
		k, pool, ok := strings.Cut(strings.TrimSpace(toks[0]), "=")
		if !ok || strings.TrimSpace(k) != "pool" || strings.TrimSpace(pool) == "" {
			return nil, fmt.Errorf("%w: %q: a specification starts with pool=NAME (or pool=* for every pool): want %s", ErrInvalid, toks[0], specForm)
		}
		pool = strings.TrimSpace(pool)
		if len(toks) == 1 {
			return nil, fmt.Errorf("%w: %q names no class: want %s", ErrInvalid, spec, specForm)
		}
		if out[pool] == nil {
			out[pool] = PoolLimits{}
		}
		seen := map[Class]bool{}
		for _, tok := range toks[1:] {
			name, val, ok := strings.Cut(strings.TrimSpace(tok), "=")
			if !ok {
				return nil, fmt.Errorf("%w: %q in %q: want CLASS=LIMIT, CLASS %s", ErrInvalid, tok, spec, classForm)
			}
			cl := Class(strings.ToLower(strings.TrimSpace(name)))
			if cl == "maint" {
				cl = Maintenance
			}
			if !cl.Valid() {
				return nil, fmt.Errorf("%w: %q in %q: unknown class %q: want %s", ErrInvalid, tok, spec, name, classForm)
			}
			if seen[cl] {
				return nil, fmt.Errorf("%w: %q in %q: class %s given twice for pool %s: join both limits with + (300IOPS+100MB/s)", ErrInvalid, tok, spec, cl, pool)
			}
			seen[cl] = true
			l, err := ParseLimit(val)
			if err != nil {
				return nil, fmt.Errorf("%q in %q: %w", tok, spec, err)
			}
			out[pool][cl] = l
		}
	}
	return out, nil
}

// byteUnit is a rate unit ParseLimit accepts, in bytes.
type byteUnit struct {
	suffix string
	bytes  float64
}

// byteUnits returns the rate units ParseLimit accepts, lower case.
func byteUnits() []byteUnit {
	return []byteUnit{
		{"kib/s", 1 << 10}, {"mib/s", 1 << 20}, {"gib/s", 1 << 30},
		{"kb/s", 1e3}, {"mb/s", 1e6}, {"gb/s", 1e9},
	}
}

// ParseLimit reads one LIMIT: "unlimited" or "inf", "300IOPS", "100MB/s"
// (KB/s, MB/s, GB/s decimal; KiB/s, MiB/s, GiB/s binary), or an IOPS and
// a bytes limit joined by "+". Errors wrap ErrInvalid.
func ParseLimit(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "unlimited", "inf":
		return Limit{}, nil
	}
	var l Limit
	for _, part := range strings.Split(s, "+") {
		low := strings.ToLower(strings.TrimSpace(part))
		num, per := low, 0.0
		switch {
		case strings.HasSuffix(low, "iops"):
			num = strings.TrimSuffix(low, "iops")
		default:
			for _, u := range byteUnits() {
				if strings.HasSuffix(low, u.suffix) {
					num, per = strings.TrimSuffix(low, u.suffix), u.bytes
					break
				}
			}
			if per == 0 {
				return Limit{}, fmt.Errorf("%w: limit %q: want %s", ErrInvalid, s, limitForm)
			}
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return Limit{}, fmt.Errorf("%w: limit %q: %q is not a positive number: want %s", ErrInvalid, s, num, limitForm)
		}
		if per == 0 {
			if l.IOPS != 0 {
				return Limit{}, fmt.Errorf("%w: limit %q gives IOPS twice: want %s", ErrInvalid, s, limitForm)
			}
			l.IOPS = v
		} else {
			if l.BytesPerSec != 0 {
				return Limit{}, fmt.Errorf("%w: limit %q gives a byte rate twice: want %s", ErrInvalid, s, limitForm)
			}
			l.BytesPerSec = v * per
		}
	}
	return l, nil
}

package policy

import (
	"strings"
	"time"
)

// File is what a policy knows of one file: its attributes, and which of
// them the caller knows (Known). An attribute whose bit is not in Known is
// NULL in the policy, whatever its field holds: at creation only the path,
// name, owner, group and mode are known (AttrsAtCreate), so a condition on
// FILE_SIZE is UNKNOWN there.
type File struct {
	// Known says which attributes below are known. The zero value knows
	// none: pass AttrsAll for a file read from the namespace.
	Known AttrSet

	// Path is the file's path from the file system's root, "/"-separated
	// (PATH_NAME). Name is its last element (NAME); empty, it is taken
	// from Path.
	Path, Name string
	// Size is the file's length in bytes (FILE_SIZE).
	Size int64
	// Allocated is the bytes the file's data takes in its pool, with
	// protection (KB_ALLOCATED is it in KiB, rounded up).
	Allocated int64
	// Access, Modify, Change and Create are the file's times (ACCESS_TIME,
	// MODIFICATION_TIME, CHANGE_TIME, CREATION_TIME). A zero time is NULL.
	Access, Modify, Change, Create time.Time
	// UID and GID are the owner and group (USER_ID, GROUP_ID).
	UID, GID uint32
	// Mode is the POSIX st_mode: the file type bits (S_IFMT, e.g. 0o100000
	// for a regular file) and the permission bits. MODE shows it as ls
	// does ("-rw-r--r--"); without type bits the type shows as '?'.
	Mode uint32
	// Nlink is the number of names of the file (NLINK).
	Nlink uint32
	// Pool and Protection are where the file's data is and how it is
	// protected (POOL_NAME, PROTECTION: "ec:4+2").
	Pool, Protection string
	// Xattr looks up an extended attribute (XATTR('user.tier')); ok false,
	// or a nil Xattr, makes it NULL.
	Xattr func(name string) (value string, ok bool)
}

// AttrSet is a set of a File's attributes.
type AttrSet uint32

// The attributes of a File. CURRENT_TIMESTAMP is always known: it is the
// evaluation's now.
const (
	AttrPath       AttrSet = 1 << iota // PATH_NAME
	AttrName                           // NAME
	AttrSize                           // FILE_SIZE
	AttrAllocated                      // KB_ALLOCATED
	AttrAccess                         // ACCESS_TIME
	AttrModify                         // MODIFICATION_TIME
	AttrChange                         // CHANGE_TIME
	AttrCreate                         // CREATION_TIME
	AttrUID                            // USER_ID
	AttrGID                            // GROUP_ID
	AttrMode                           // MODE
	AttrNlink                          // NLINK
	AttrPool                           // POOL_NAME
	AttrProtection                     // PROTECTION
	AttrXattrs                         // XATTR(...)

	// AttrsAll is every attribute: a file read from the namespace.
	AttrsAll AttrSet = 1<<iota - 1
	// AttrsAtCreate is what is known when a file is created, which is when
	// SET POOL rules are evaluated.
	AttrsAtCreate = AttrPath | AttrName | AttrUID | AttrGID | AttrMode
)

// String names the set's attributes as the language does, separated by
// commas ("PATH_NAME,FILE_SIZE,XATTR"); "none" for the empty set.
func (s AttrSet) String() string {
	var names []string
	for a := attr(0); a < numAttrs; a++ {
		if set := attrs[a].set; set != 0 && s&set != 0 {
			names = append(names, attrs[a].name)
		}
	}
	if s&AttrXattrs != 0 {
		names = append(names, "XATTR")
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// attr identifies an attribute of the language.
type attr uint8

const (
	aPath attr = iota
	aName
	aFileSize
	aKBAllocated
	aAccess
	aModify
	aChange
	aCreate
	aUID
	aGID
	aMode
	aNlink
	aPool
	aProtection
	aNow
	numAttrs
)

// attrs describes each attribute: its name in the language, its type and
// the File bit that makes it known (0: always known).
var attrs = [numAttrs]struct {
	name string
	typ  typ
	set  AttrSet
}{
	aPath:        {"PATH_NAME", tyStr, AttrPath},
	aName:        {"NAME", tyStr, AttrName},
	aFileSize:    {"FILE_SIZE", tyNum, AttrSize},
	aKBAllocated: {"KB_ALLOCATED", tyNum, AttrAllocated},
	aAccess:      {"ACCESS_TIME", tyTime, AttrAccess},
	aModify:      {"MODIFICATION_TIME", tyTime, AttrModify},
	aChange:      {"CHANGE_TIME", tyTime, AttrChange},
	aCreate:      {"CREATION_TIME", tyTime, AttrCreate},
	aUID:         {"USER_ID", tyNum, AttrUID},
	aGID:         {"GROUP_ID", tyNum, AttrGID},
	aMode:        {"MODE", tyStr, AttrMode},
	aNlink:       {"NLINK", tyNum, AttrNlink},
	aPool:        {"POOL_NAME", tyStr, AttrPool},
	aProtection:  {"PROTECTION", tyStr, AttrProtection},
	aNow:         {"CURRENT_TIMESTAMP", tyTime, 0},
}

// lookupAttr returns the attribute spelled name (in any case).
func lookupAttr(name string) (attr, bool) {
	for a := attr(0); a < numAttrs; a++ {
		if strings.EqualFold(attrs[a].name, name) {
			return a, true
		}
	}
	return 0, false
}

// fileName returns f's NAME: Name, or the last element of Path.
func fileName(f *File) string {
	if f.Name != "" {
		return f.Name
	}
	p := strings.TrimRight(f.Path, "/")
	if p == "" {
		return f.Path // "/" or ""
	}
	return p[strings.LastIndexByte(p, '/')+1:]
}

// seconds turns a time into the language's timestamps: seconds since
// 1970-01-01 UTC, as a float64 (exact to well under a microsecond for
// today's dates). A zero time is NULL.
func seconds(t time.Time) (float64, bool) {
	if t.IsZero() {
		return 0, false
	}
	return float64(t.Unix()) + float64(t.Nanosecond())*1e-9, true
}

// POSIX file types (the S_IFMT bits of st_mode).
const (
	modeTypeMask = 0o170000
	modeSocket   = 0o140000
	modeSymlink  = 0o120000
	modeRegular  = 0o100000
	modeBlock    = 0o060000
	modeDir      = 0o040000
	modeChar     = 0o020000
	modeFIFO     = 0o010000
)

// FormatMode returns st_mode as ls shows it, the value of MODE: a type
// character (- d l b c p s, ? for none or an unknown one) and nine
// permission characters, with set-user-id, set-group-id and sticky shown
// as s/S and t/T in the execute places ("-rwsr-xr-x", "drwxrwxrwt").
func FormatMode(m uint32) string {
	var b [10]byte
	switch m & modeTypeMask {
	case modeRegular:
		b[0] = '-'
	case modeDir:
		b[0] = 'd'
	case modeSymlink:
		b[0] = 'l'
	case modeBlock:
		b[0] = 'b'
	case modeChar:
		b[0] = 'c'
	case modeFIFO:
		b[0] = 'p'
	case modeSocket:
		b[0] = 's'
	default:
		b[0] = '?'
	}
	const rwx = "rwxrwxrwx"
	for i := range 9 {
		if m&(1<<(8-i)) != 0 {
			b[1+i] = rwx[i]
		} else {
			b[1+i] = '-'
		}
	}
	special := func(bit uint32, at int, set, unset byte) {
		if m&bit == 0 {
			return
		}
		if b[at] == 'x' {
			b[at] = set
		} else {
			b[at] = unset
		}
	}
	special(0o4000, 3, 's', 'S')
	special(0o2000, 6, 's', 'S')
	special(0o1000, 9, 't', 'T')
	return string(b[:])
}

package meta

import (
	"fmt"
	"strings"
)

// Limits on names and attributes. Violations are refused with the error
// noted, before anything is written.
const (
	// MaxNameLen is the longest entry name in bytes (ErrNameTooLong).
	MaxNameLen = 255
	// MaxSymlinkLen is the longest symlink target in bytes (ErrNameTooLong).
	MaxSymlinkLen = 4095
	// MaxLinks is the most links (entries) one inode may have (ErrTooManyLinks).
	MaxLinks = 1024
	// MaxXattrNameLen is the longest xattr name in bytes (ErrXattrTooLarge).
	MaxXattrNameLen = 255
	// MaxXattrValueLen is the largest xattr value in bytes (ErrXattrTooLarge).
	MaxXattrValueLen = 64 << 10
	// MaxXattrListLen bounds the sum over an inode's xattr names of
	// len(name)+1, as listxattr returns them (ErrXattrTooLarge).
	MaxXattrListLen = 64 << 10
	// MaxPoolNameLen is the longest pool name in bytes.
	MaxPoolNameLen = 64
)

// ValidName returns nil if name can be a directory entry: 1 to MaxNameLen
// bytes, no '/' or NUL, not "." or "..". Errors wrap ErrInvalid or
// ErrNameTooLong.
func ValidName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalid)
	case name == "." || name == "..":
		return fmt.Errorf("%w: name %q is reserved", ErrInvalid, name)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: name of %d bytes, the limit is %d", ErrNameTooLong, len(name), MaxNameLen)
	case strings.IndexByte(name, '/') >= 0:
		return fmt.Errorf("%w: name %q contains '/'", ErrInvalid, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: name %q contains a NUL byte", ErrInvalid, name)
	}
	return nil
}

// ValidPoolName returns nil if name is 1 to MaxPoolNameLen bytes of
// letters, digits, '.', '_' and '-'. Errors wrap ErrInvalid.
func ValidPoolName(name string) error {
	if name == "" || len(name) > MaxPoolNameLen {
		return fmt.Errorf("%w: pool name %q: want 1 to %d bytes", ErrInvalid, name, MaxPoolNameLen)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: pool name %q: use letters, digits, '.', '_' and '-'", ErrInvalid, name)
		}
	}
	return nil
}

func validXattrName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty xattr name", ErrInvalid)
	case len(name) > MaxXattrNameLen:
		return fmt.Errorf("%w: xattr name of %d bytes, the limit is %d", ErrXattrTooLarge, len(name), MaxXattrNameLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: xattr name %q contains a NUL byte", ErrInvalid, name)
	}
	return nil
}

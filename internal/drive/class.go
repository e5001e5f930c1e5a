package drive

import "fmt"

// Class is the kind of medium behind a drive. Throttling thresholds of the
// job engine and QoS differ per class.
type Class string

// Drive classes.
const (
	ClassNVMe Class = "nvme"
	ClassSSD  Class = "ssd"
	ClassHDD  Class = "hdd"
)

// ParseClass returns the Class named by s, which must be exactly one of
// "nvme", "ssd" or "hdd". Otherwise it returns an error wrapping ErrInvalid
// that names the input and the accepted values.
func ParseClass(s string) (Class, error) {
	switch c := Class(s); c {
	case ClassNVMe, ClassSSD, ClassHDD:
		return c, nil
	}
	return "", fmt.Errorf("%w: drive class %q: want one of nvme, ssd, hdd", ErrInvalid, s)
}

// String returns the class name.
func (c Class) String() string { return string(c) }

package drive

import (
	"errors"
	"strings"
	"testing"
)

func TestParseID(t *testing.T) {
	tests := []struct {
		in      string
		want    ID
		wantErr bool
	}{
		{"d7", 7, false},
		{"7", 7, false},
		{"d0", 0, false},
		{"d4294967295", 4294967295, false},
		{"d4294967296", 0, true},
		{"", 0, true},
		{"d", 0, true},
		{"dd7", 0, true},
		{"D7", 0, true},
		{"d-1", 0, true},
		{"d+1", 0, true},
		{" d7", 0, true},
		{"d7x", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseID(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseID(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseID(%q) error %v is not ErrInvalid", tt.in, err)
		}
		if got != tt.want {
			t.Errorf("ParseID(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if err == nil {
			if back, _ := ParseID(got.String()); back != got {
				t.Errorf("ParseID(%q.String()) = %v", got, back)
			}
		}
	}
	if s := ID(7).String(); s != "d7" {
		t.Errorf("ID(7).String() = %q", s)
	}
}

func TestParseClass(t *testing.T) {
	tests := []struct {
		in      string
		want    Class
		wantErr bool
	}{
		{"nvme", ClassNVMe, false},
		{"ssd", ClassSSD, false},
		{"hdd", ClassHDD, false},
		{"", "", true},
		{"SSD", "", true},
		{"tape", "", true},
	}
	for _, tt := range tests {
		got, err := ParseClass(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseClass(%q) = %q, %v; want %q, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nvme, ssd, hdd") ||
			!strings.Contains(err.Error(), `"`+tt.in+`"`)) {
			t.Errorf("ParseClass(%q) error %q should wrap ErrInvalid and name input and accepted values", tt.in, err)
		}
	}
}

func TestParseBlockID(t *testing.T) {
	valid := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{"valid", valid, false},
		{"zeros", strings.Repeat("0", 32), false},
		{"upper case", strings.ToUpper(valid), true},
		{"short", valid[:31], true},
		{"long", valid + "0", true},
		{"empty", "", true},
		{"dot dot", "../" + valid[3:], true},
		{"dot dot only", "..", true},
		{"absolute", "/etc/passwd" + valid[11:], true},
		{"slash inside", valid[:16] + "/" + valid[17:], true},
		{"nul", valid[:31] + "\x00", true},
		{"space", valid[:31] + " ", true},
		{"non hex", "g" + valid[1:], true},
		{"unicode", "é" + valid[2:], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := ParseBlockID(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseBlockID(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v is not ErrInvalid", err)
				}
				return
			}
			if id.String() != tt.in {
				t.Fatalf("round trip: %q -> %q", tt.in, id.String())
			}
		})
	}
}

func TestNewBlockID(t *testing.T) {
	a, b := NewBlockID(), NewBlockID()
	if a == b || a.IsZero() {
		t.Fatalf("NewBlockID returned %v and %v", a, b)
	}
	if got, err := ParseBlockID(a.String()); err != nil || got != a {
		t.Fatalf("ParseBlockID(%v) = %v, %v", a, got, err)
	}
}

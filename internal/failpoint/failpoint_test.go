package failpoint

import (
	"errors"
	"strings"
	"testing"
)

func TestEvalActions(t *testing.T) {
	if err := Eval("t/none"); err != nil {
		t.Fatalf("disabled point fired: %v", err)
	}
	if err := Enable("t/err", "error(disk on fire)"); err != nil {
		t.Fatal(err)
	}
	defer Disable("t/err")
	err := Eval("t/err")
	if !errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "t/err") {
		t.Fatalf("Eval = %v", err)
	}
	if Fired("t/err") != 1 {
		t.Fatalf("fired %d", Fired("t/err"))
	}

	if err := Enable("t/twice", "2*error"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := Eval("t/twice"); !errors.Is(err, ErrInjected) {
			t.Fatalf("fire %d: %v", i, err)
		}
	}
	if err := Eval("t/twice"); err != nil {
		t.Fatalf("third fire of 2*error: %v", err)
	}

	if err := Enable("t/panic", "panic"); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic action did not panic")
			}
		}()
		_ = Eval("t/panic")
	}()
	Disable("t/panic")
	if err := Eval("t/panic"); err != nil {
		t.Fatalf("disabled: %v", err)
	}
}

func TestEnableAllAndBadSpecs(t *testing.T) {
	if err := EnableAll("a/x=error; b/y=3*error(z)"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Names(), ","); got != "a/x,b/y" {
		t.Fatalf("names %q", got)
	}
	Disable("a/x")
	Disable("b/y")
	for _, bad := range []string{"a/x", "a/x=explode", "a/x=0*error", "=error", "a x=error"} {
		if err := EnableAll(bad); err == nil {
			t.Errorf("EnableAll(%q) accepted", bad)
		}
	}
	if len(Names()) != 0 {
		t.Fatalf("bad specs left points: %v", Names())
	}
}

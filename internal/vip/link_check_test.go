package vip

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLinkUp(t *testing.T) {
	sys := t.TempDir()
	mk := func(iface, flags, carrier string) {
		d := filepath.Join(sys, iface)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "flags"), []byte(flags+"\n"), 0o644)
		if carrier != "" {
			os.WriteFile(filepath.Join(d, "carrier"), []byte(carrier+"\n"), 0o644)
		}
	}
	mk("eth0", "0x1003", "1")
	mk("eth1", "0x1002", "")
	mk("eth2", "0x1003", "0")
	for iface, want := range map[string]string{
		"eth0": "",
		"eth1": "eth1 is administratively down",
		"eth2": "eth2 has no carrier",
		"eth9": "interface eth9",
	} {
		err := linkUp(sys, iface)
		if want == "" && err != nil || want != "" && (!errors.Is(err, ErrLinkDown) || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", iface, err, want)
		}
	}
	if _, err := os.Stat("/sys/class/net/lo"); err == nil {
		if err := LinkUp("lo")(context.Background()); err != nil {
			t.Errorf("lo: %v", err)
		}
	}
}

func TestCommandCheck(t *testing.T) {
	if err := CommandCheck([]string{"true"})(context.Background()); err != nil {
		t.Error(err)
	}
	err := CommandCheck([]string{"sh", "-c", "echo unreachable; exit 1"})(context.Background())
	if !errors.Is(err, ErrLinkDown) || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("%v", err)
	}
}

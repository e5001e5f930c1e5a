// Command weft is the weft cluster file system: its node server, its local
// cluster launcher and its administration commands, in one binary.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
)

// globals are the flags every command shares.
type globals struct {
	admin    string
	json     bool
	pki      string // --pki: the directory of the cluster's CAs and of this user's certificate
	token    string // --token
	as       string // --as: which identity of the --pki directory
	insecure bool   // --insecure: plain text, to a cluster run --insecure
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "weft:", err)
		var ue usageError
		// cobra reports an unknown top-level command itself, as a plain error.
		if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ") {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks a mistake in the command line (exit status 2).
type usageError struct{ error }

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "weft",
		Short: "weft — a scale-out cluster file system with online data management",
		Long: `weft is a scale-out cluster file system. Each node runs "weft server";
"weft local up" runs a whole cluster on this machine; the other commands
administer a running cluster through the admin API of any node.

The admin API is found from --admin HOST:PORT, then $WEFT_ADMIN, then the
file weft-data/admin.addr written by "weft local up" in the current
directory. The credentials to use it, the same way: --pki DIR (a
directory with the cluster's ca.crt and an admin certificate), then
$WEFT_PKI, then weft-data/pki; a bearer token from --token or $WEFT_TOKEN
(with the CA of --pki to check the nodes). See "weft cert --help".`,
		Example: `  weft local up                      # a 3-node, 12-drive cluster in ./weft-data
  weft status                        # cluster health
  weft drive list --json             # drives as JSON
  weft pool create fast --protection ec:4+2`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.PersistentFlags().StringVar(&g.admin, "admin", "", "admin API address HOST:PORT of any node (default: $WEFT_ADMIN, then weft-data/admin.addr)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON instead of a table")
	root.PersistentFlags().StringVar(&g.pki, "pki", "", "directory of the cluster's ca.crt and of your certificate (default: $WEFT_PKI, then weft-data/pki)")
	root.PersistentFlags().StringVar(&g.token, "token", "", "bearer token of the admin API (default: $WEFT_TOKEN; weft token create)")
	root.PersistentFlags().StringVar(&g.as, "as", "", "the identity of the --pki directory to use when it holds several (its NAME)")
	root.PersistentFlags().BoolVar(&g.insecure, "insecure", false, "talk plain text, to a cluster run with --insecure (no certificates, no token)")
	root.AddCommand(
		newServerCmd(g),
		newLocalCmd(g),
		newStatusCmd(g),
		newNodeCmd(g),
		newDriveCmd(g),
		newPoolCmd(g),
		newMountCmd(g),
		newFileCmd(g),
		newBenchCmd(g),
		newJobCmd(g),
		newFsckCmd(g),
		newClusterCmd(g),
		newCertCmd(g),
		newTokenCmd(g),
		newPolicyCmd(g),
		newCallbackCmd(g),
		newQoSCmd(g),
		newNFSCmd(g),
		newCheckstreamCmd(g),
		newVersionCmd(),
	)
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group (a command with
// subcommands and no action of its own) refuse an unknown subcommand with
// a usage error (exit status 2) naming it and suggesting near names, where
// cobra would print the group's help and exit 0, so that a script's typo
// is noticed. A group run with no subcommand still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.Parent() == nil || !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2
		}
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
		}
		return usageError{fmt.Errorf("%s (see %s --help)", msg, c.CommandPath())}
	}
}

// exactArgs is cobra.ExactArgs with a usage error that names the arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %s (got %d arguments; see --help)", c.CommandPath(), names, len(args))}
		}
		return nil
	}
}

// client returns an admin client for the cluster the flags point at, with
// the credentials they point at.
func (g *globals) client() (*admin.Client, error) {
	addr, err := admin.Discover(g.admin)
	if err != nil {
		return nil, err
	}
	opts, err := g.credentials()
	if err != nil {
		return nil, err
	}
	return admin.NewClient(addr, opts...), nil
}

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
)

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke bearer tokens of the admin API",
		Long: `A bearer token lets a script or a monitoring system use the admin API
without a certificate (Authorization: Bearer TOKEN; weft --token TOKEN or
$WEFT_TOKEN, with --pki DIR holding the cluster's ca.crt to check the
nodes). A token may do what an administrator may. The cluster keeps only
a hash of it: it is shown once, when created. Revoking it takes effect
at once.`,
	}
	var expires string
	create := &cobra.Command{
		Use:   "create NAME [--expires DURATION]",
		Short: "Make a token (shown once)",
		Example: `  weft token create prometheus
  weft token create ci --expires 720h
  WEFT_TOKEN=$(weft token create ci --json | jq -r .token) weft --pki ./ca-only status`,
		Args: exactArgs(1, "one token name"),
		RunE: func(c *cobra.Command, args []string) error {
			if expires != "" {
				d, err := parseValidity(expires)
				if err != nil {
					return usageError{fmt.Errorf("--expires: %w", err)}
				}
				expires = d.String()
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			r, err := cl.CreateToken(c.Context(), args[0], expires)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			until := "until revoked"
			if !r.View.Expires.IsZero() {
				until = "until " + r.View.Expires.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(c.OutOrStdout(), "%s\n\ntoken %s (id %s), valid %s: it is shown only now; keep it as you would a password\n", r.Token, r.View.Name, r.View.ID, until)
			return nil
		},
	}
	create.Flags().StringVar(&expires, "expires", "", "lifetime (90d, 720h; default: until revoked)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens (never their secrets)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).Tokens, func(w io.Writer, toks []admin.TokenView) error {
				t := newTable(w, "NAME", "ID", "CREATED", "EXPIRES", "BY")
				for _, tk := range toks {
					exp := "never"
					if !tk.Expires.IsZero() {
						exp = tk.Expires.UTC().Format(time.RFC3339)
						if tk.Expired {
							exp += " (expired)"
						}
					}
					t.row(tk.Name, tk.ID, tk.Created.UTC().Format(time.RFC3339), exp, tk.CreatedBy)
				}
				return t.flush()
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME|ID",
		Short: "Revoke a token (at once)",
		Args:  exactArgs(1, "one token name or id"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			v, err := cl.RevokeToken(c.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "token %s (id %s) revoked\n", v.Name, v.ID)
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/pki"
)

// renewWarning is how long before expiry weft cert list warns.
const renewWarning = 30 * 24 * time.Hour

func newClusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Create a new cluster's certificate authority",
	}
	var name, adminName, label string
	var hosts []string
	initCmd := &cobra.Command{
		Use:   "init --pki DIR --name NODE --host HOST [--host HOST…]",
		Short: "Make a new cluster's CA, its first node's certificate and an administrator's",
		Long: `Make the certificate authority of a new cluster of many machines in --pki
DIR (created 0700; the CA key and every key 0600), with the certificate of
the first node (NODE, with each --host as a name or address it is reached
by, plus localhost and this machine's host name) and an administrator's
certificate (--admin, default root) for the CLI on this machine.

Keep DIR on this machine: it issues every other certificate (weft cert
issue). Start the first node with --pki DIR. "weft local up" makes its own
CA by itself; this is for clusters of several machines. See
docs/admin-guide.md, "Certificates".`,
		Example: `  weft cluster init --pki /etc/weft/pki --name n1 --host 10.0.0.1 --host n1.example.com
  weft server --name n1 --pki /etc/weft/pki --etcd-embed ...`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			dir, _ := g.pkiDir()
			if g.pki == "" && os.Getenv(envPKI) == "" {
				return usageError{errors.New("weft cluster init needs --pki DIR (or $WEFT_PKI): where the new cluster's CA goes")}
			}
			if name == "" || len(hosts) == 0 {
				return usageError{errors.New("weft cluster init needs --name NODE and at least one --host (the first node's name and address)")}
			}
			if label == "" {
				label = name
			}
			now := time.Now()
			if _, err := pki.InitCA(dir, label, now); err != nil {
				return err
			}
			hostname, _ := os.Hostname()
			node := pki.Identity{Kind: pki.KindNode, Name: name}
			ncert, err := pki.IssueTo(dir, dir, node, append(hosts, pki.DefaultHosts(hostname)...), 0, now)
			if err != nil {
				return err
			}
			adm := pki.Identity{Kind: pki.KindAdmin, Name: adminName}
			if _, err := pki.IssueTo(dir, dir, adm, nil, 0, now); err != nil {
				return err
			}
			w := c.OutOrStdout()
			fmt.Fprintf(w, "cluster CA made in %s (ca.crt, ca.key: keep the key on this machine)\n", dir)
			fmt.Fprintf(w, "issued %s for %s, valid until %s\n", node, strings.Join(hostsOf(ncert.DNSNames, ncert.IPAddresses), ", "), ncert.NotAfter.Format(time.DateOnly))
			fmt.Fprintf(w, "issued %s for the CLI on this machine (export WEFT_PKI=%s)\n", adm, dir)
			fmt.Fprintf(w, "next: issue the other founding nodes' certificates before their first start (weft cert issue --pki %s --node NAME --host ADDR --out DIR), then start node %s with --pki %s\n", dir, name, dir)
			return nil
		},
	}
	initCmd.Flags().StringVar(&name, "name", "", "the first node's name")
	initCmd.Flags().StringArrayVar(&hosts, "host", nil, "a name or address the first node is reached by (repeatable)")
	initCmd.Flags().StringVar(&adminName, "admin", "root", "the administrator's identity name")
	initCmd.Flags().StringVar(&label, "cluster", "", "the cluster's name, written in the CA's subject (default: the node's name)")
	cmd.AddCommand(initCmd)
	return cmd
}

func newCertCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Issue, list and rotate the cluster's certificates",
		Long: `The cluster's certificate authority, in the directory --pki DIR ($WEFT_PKI,
or weft-data/pki of a local cluster), issues every identity: nodes (node:
NAME), clients such as mounts (client:NAME) and administrators
(admin:NAME). Every connection of the cluster is mutual TLS with them;
etcd lets an identity in only once it is registered (its etcd user).

  weft cert issue        a certificate for a node, client or administrator
  weft cert register     register an identity in the control plane
  weft cert list         the identities issued, their expiry
  weft cert rotate-ca    a new CA beside the old one (rotation, step 1)
  weft cert drop-old-cas the old CAs out (rotation, last step)

See docs/admin-guide.md, "Certificates", for each procedure step by step.`,
	}
	var node, client, adm, out, valid string
	var hosts []string
	issue := &cobra.Command{
		Use:   "issue --node NAME [--host H …] | --client NAME | --admin NAME [--out DIR] [--valid DURATION]",
		Short: "Issue (or renew) a node's, client's or administrator's certificate",
		Long: `Issue a certificate signed by the cluster's CA (--pki DIR) and write it with
its key (0600) to --out DIR (default the CA's directory; another directory
also receives the CA bundle ca.crt, so that it is all a machine needs, and
the CA's directory keeps a copy of the certificate in issued/). Issuing an
identity again renews it: running nodes and mounts pick the new files up
within seconds.

A node's certificate names the node's addresses (--host, repeatable: its
IP addresses and DNS names; localhost, 127.0.0.1, ::1 and the host name
of the machine running this command are added). --valid is its lifetime
(default 2 years; 90d, 8760h; never past the CA's).

Then, if the cluster answers (with this machine's admin credentials), the
identity is registered in the control plane so that etcd lets it in; if
not, register it later with weft cert register. The founding nodes of a
new cluster need no registration if their certificates are issued before
the first node starts (it registers every identity of its --pki
directory, and of issued/).

Here --admin NAME names an administrator identity, not the admin API: the
cluster to register with is found from $WEFT_ADMIN, then
weft-data/admin.addr. If the directory holds several admin certificates,
--as NAME says which one registers.`,
		Example: `  weft cert issue --node n4 --host 10.0.0.4 --out /tmp/n4-pki      # then copy /tmp/n4-pki to n4:/etc/weft/pki
  weft cert issue --client laptop --out /tmp/laptop-pki
  weft cert issue --admin alice --valid 90d --out /tmp/alice-pki
  weft cert issue --node n1 --host 10.0.0.1                          # renew n1's, in the CA's directory`,
		Args: exactArgs(0, "no arguments (the identity is given by --node, --client or --admin)"),
		RunE: func(c *cobra.Command, _ []string) error {
			id, err := oneIdentity(node, client, adm)
			if err != nil {
				return err
			}
			if len(hosts) > 0 && id.Kind != pki.KindNode {
				return usageError{errors.New("--host names a node's addresses; a client's or administrator's certificate has none")}
			}
			if id.Kind == pki.KindNode && len(hosts) == 0 {
				return usageError{fmt.Errorf("a node's certificate needs the addresses it is reached by: --host ADDR (repeatable)")}
			}
			validity, err := parseValidity(valid)
			if err != nil {
				return usageError{err}
			}
			dir, err := g.caDir()
			if err != nil {
				return err
			}
			if out == "" {
				out = dir
			}
			if id.Kind == pki.KindNode {
				hostname, _ := os.Hostname()
				hosts = append(hosts, pki.DefaultHosts(hostname)...)
			}
			cert, err := pki.IssueTo(dir, out, id, hosts, validity, time.Now())
			if err != nil {
				return err
			}
			w := c.OutOrStdout()
			cp, kp := pki.Paths(out, id)
			fmt.Fprintf(w, "issued %s, valid until %s: %s, %s (0600)", id, cert.NotAfter.Format(time.DateOnly), cp, kp)
			if id.Kind == pki.KindNode {
				fmt.Fprintf(w, "; names %s", strings.Join(hostsOf(cert.DNSNames, cert.IPAddresses), ", "))
			}
			fmt.Fprintln(w)
			if filepath.Clean(out) != filepath.Clean(dir) {
				fmt.Fprintf(w, "%s holds the CA bundle too: copy the directory to the machine (never ca.key)\n", out)
			}
			register(c.Context(), g, w, id)
			return nil
		},
	}
	issue.Flags().StringVar(&node, "node", "", "issue a node's certificate (NAME: the node's --name)")
	issue.Flags().StringVar(&client, "client", "", "issue a client's (a mount's) certificate")
	issue.Flags().StringVar(&adm, "admin", "", "issue an administrator's certificate (the admin API's address: $WEFT_ADMIN)")
	issue.Flags().StringArrayVar(&hosts, "host", nil, "a node's address or DNS name (repeatable)")
	issue.Flags().StringVar(&out, "out", "", "directory to write the certificate and key to (default: the CA's)")
	issue.Flags().StringVar(&valid, "valid", "", "lifetime, e.g. 90d, 8760h (default 2 years)")

	var rnode, rclient, radm string
	reg := &cobra.Command{
		Use:   "register --node NAME | --client NAME | --admin NAME",
		Short: "Let an identity into the control plane (its etcd user)",
		Long: `Register an identity in the control plane: etcd then admits requests made
with its certificate, with the rights of its kind (nodes everything;
clients read the control plane and write the namespace; administrators
read). weft cert issue does it when the cluster answers; a node whose
certificate was issued while the cluster was down says at start that it
needs it. Idempotent. Here --admin NAME names an administrator identity:
the cluster is found from $WEFT_ADMIN, then weft-data/admin.addr.`,
		Args: exactArgs(0, "no arguments (the identity is given by --node, --client or --admin)"),
		RunE: func(c *cobra.Command, _ []string) error {
			id, err := oneIdentity(rnode, rclient, radm)
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			u, err := cl.RegisterIdentity(c.Context(), id)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "registered %s (etcd role %s)\n", u.Identity, strings.Join(u.Roles, ", "))
			return nil
		},
	}
	reg.Flags().StringVar(&rnode, "node", "", "a node's name")
	reg.Flags().StringVar(&rclient, "client", "", "a client's name")
	reg.Flags().StringVar(&radm, "admin", "", "an administrator's name (the admin API's address: $WEFT_ADMIN)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the identities issued, with their expiry",
		Long: `List the identities whose certificates the CA's directory holds (and its
issued/ copies): kind, name, expiry, the CA that signed it, a node's
names. STATE is ok, renew (expires within 30 days: weft cert issue it
again), expired, or old-ca (signed by a CA no longer in the bundle, or by
the old one during a rotation: issue it again).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := g.caDir()
			if err != nil {
				return err
			}
			issued, err := pki.List(dir)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), issued)
			}
			return printCerts(c.OutOrStdout(), issued, time.Now())
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate-ca",
		Short: "Start a CA rotation: a new CA, trusted beside the old one",
		Long: `Make a new CA and put it first in the bundle (ca.crt), keeping the old one
after it: certificates of either are trusted while every identity is
issued again by the new one. Then: copy ca.crt to every machine; restart
each node's etcd member, one node at a time (etcd reads the trusted CAs
when it starts); issue every identity again (weft cert issue) and copy
the files; finally weft cert drop-old-cas. Nodes and mounts read the
new files without a restart. See docs/admin-guide.md, "Rotating the CA".`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := g.caDir()
			if err != nil {
				return err
			}
			old, err := pki.LoadBundle(dir)
			if err != nil {
				return err
			}
			ca, err := pki.RotateCA(dir, strings.TrimPrefix(old[0].Subject.CommonName, "weft CA "), time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "new CA %q (serial %x) is first in %s; %d older trusted until weft cert drop-old-cas\n",
				ca.Cert.Subject.CommonName, ca.Cert.SerialNumber.Bytes()[:4], pki.BundlePath(dir), len(old))
			fmt.Fprintln(c.OutOrStdout(), "next: copy ca.crt to every machine, restart the etcd members one node at a time, issue every identity again (weft cert list shows them as old-ca)")
			return nil
		},
	}
	var force bool
	drop := &cobra.Command{
		Use:   "drop-old-cas",
		Short: "End a CA rotation: trust only the newest CA",
		Long: `Keep only the newest CA in the bundle. Certificates of the old CAs stop
working wherever the new bundle is read, so every identity must have been
issued by the new CA first: the command refuses while weft cert list
shows one as old-ca, unless --force. Then copy ca.crt to every machine
and restart the etcd members one node at a time.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := g.caDir()
			if err != nil {
				return err
			}
			bundle, err := pki.LoadBundle(dir)
			if err != nil {
				return err
			}
			issued, err := pki.List(dir)
			if err != nil {
				return err
			}
			var stale []string
			for _, is := range issued {
				if is.CA != 0 {
					stale = append(stale, is.Identity.String())
				}
			}
			if len(stale) > 0 && !force {
				return fmt.Errorf("still issued by an old CA: %s: issue them again first (weft cert issue), or --force to lock them out", strings.Join(stale, ", "))
			}
			if err := pki.DropOldCAs(dir); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s now trusts only %q; copy it to every machine and restart the etcd members one node at a time\n",
				pki.BundlePath(dir), bundle[0].Subject.CommonName)
			return nil
		},
	}
	drop.Flags().BoolVar(&force, "force", false, "drop the old CAs even if identities are still issued by them")
	cmd.AddCommand(issue, reg, list, rotate, drop)
	return cmd
}

// oneIdentity returns the identity of exactly one of --node, --client and
// --admin.
func oneIdentity(node, client, adm string) (pki.Identity, error) {
	var ids []pki.Identity
	for kind, name := range map[pki.Kind]string{pki.KindNode: node, pki.KindClient: client, pki.KindAdmin: adm} {
		if name != "" {
			ids = append(ids, pki.Identity{Kind: kind, Name: name})
		}
	}
	if len(ids) != 1 {
		return pki.Identity{}, usageError{errors.New("name exactly one identity: --node NAME, --client NAME or --admin NAME")}
	}
	if !pki.ValidName(ids[0].Name) {
		return pki.Identity{}, usageError{fmt.Errorf("%s name %q: use 1-63 of a-z, A-Z, 0-9, '-', '_', '.', '@'", ids[0].Kind, ids[0].Name)}
	}
	return ids[0], nil
}

// parseValidity parses a lifetime: a Go duration, or N followed by d
// (days) or y (365 days); "" is the default.
func parseValidity(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "y": 365 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.Atoi(n)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("--valid %q: want a positive number of days (90d), years (1y) or a duration (2160h)", s)
			}
			return time.Duration(v) * unit, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--valid %q: want a positive number of days (90d), years (1y) or a duration (2160h)", s)
	}
	return d, nil
}

// register registers id through the admin API if the cluster answers
// with this machine's credentials, and says what happened.
func register(ctx context.Context, g *globals, w io.Writer, id pki.Identity) {
	cl, err := g.client()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = cl.RegisterIdentity(ctx, id)
	}
	var ae *admin.Error
	switch {
	case err == nil:
		fmt.Fprintf(w, "registered %s in the control plane\n", id)
	case errors.As(err, &ae) && ae.Code == "insecure":
	default:
		fmt.Fprintf(w, "not registered in the control plane (%v): if the cluster runs, register it with weft cert register --%s %s; "+
			"a founding node issued before the cluster's first start needs nothing\n", err, id.Kind, id.Name)
	}
}

// printCerts prints weft cert list's table.
func printCerts(w io.Writer, issued []pki.Issued, now time.Time) error {
	t := newTable(w, "IDENTITY", "EXPIRES", "LEFT", "STATE", "ISSUER", "KEY", "NAMES")
	var warn []string
	for _, is := range issued {
		left := is.NotAfter.Sub(now)
		state := "ok"
		switch {
		case left <= 0:
			state = "expired"
		case is.CA != 0:
			state = "old-ca"
		case left < renewWarning:
			state = "renew"
		}
		if state != "ok" {
			warn = append(warn, is.Identity.String())
		}
		key := "-"
		if is.HasKey {
			key = "here"
		}
		names := strings.Join(is.Hosts, ",")
		if names == "" {
			names = "-"
		}
		t.row(is.Identity.String(), is.NotAfter.UTC().Format(time.DateOnly), days(left), state, is.Issuer, key, names)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(warn) > 0 {
		fmt.Fprintf(w, "\nwarning: %s: issue again with weft cert issue (see docs/admin-guide.md, \"Renewing certificates\")\n", strings.Join(warn, ", "))
	}
	return nil
}

// hostsOf lists a certificate's DNS names and addresses.
func hostsOf(dns []string, ips []net.IP) []string {
	out := append([]string(nil), dns...)
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

// days formats a duration in whole days.
func days(d time.Duration) string {
	if d <= 0 {
		return "0d"
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

package main

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/coredns/caddy/caddyfile"
	"github.com/miekg/dns"
)

// refusal is an edit the command will not make; its message says where, why
// and what to do instead. The corefile subcommand exits 2 with it.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...)}
}

func isRefusal(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}

// edit is the result of editCorefile.
type edit struct {
	out       string   // the Corefile to write; the input itself when !changed
	zone      string   // the zone as written: lower-case, no trailing dot
	changed   bool     // false: the multicluster directive is there already
	block     string   // the server block that receives the zone, as "key key"
	line      int      // the line of the kubernetes directive in the input
	converted bool     // the kubernetes plugin's own multicluster option was removed
	reload    bool     // the server block has the reload plugin
	notes     []string // what the operator should know: imports not followed
}

// token is one word of the Corefile as CoreDNS's lexer reads it.
type token struct {
	text string
	line int // the line it starts on
	end  int // the line it ends on: a quoted word can hold newlines
}

const guide = "forward the zone to the standalone Deployment instead (deploy/README.md)"

// editCorefile adds "multicluster ZONE" just before the kubernetes directive
// of the server block that receives queries for zone, and, when that
// kubernetes directive serves the zone with its own multicluster option
// (CoreDNS >= 1.12), removes the option and the zone from the directive. It
// reads the Corefile with CoreDNS's lexer (caddyfile), finds the blocks and
// directives from the tokens' lines, and changes only the lines it must;
// every other byte stays as it was. Import lines are not followed: no file on
// this machine is read.
func editCorefile(in, zone string) (*edit, error) {
	fqdn, err := normalizeZone(zone)
	if err != nil {
		return nil, err
	}
	res, err := analyze(in, fqdn)
	if err != nil || !res.changed {
		return res, err
	}
	// Check the result the way the next run reads it.
	again, err := analyze(res.out, fqdn)
	if err == nil && again.changed {
		err = errors.New("a second run would change it again")
	}
	if err != nil {
		return nil, fmt.Errorf("internal error: the edited Corefile does not check out: %w", err)
	}
	return res, nil
}

// normalizeZone gives the zone lower-case and fully qualified.
func normalizeZone(zone string) (string, error) {
	z := strings.ToLower(strings.TrimSpace(zone))
	if z == "" || z == "." || strings.ContainsAny(z, " \t\"#{}/:") {
		return "", fmt.Errorf("invalid zone %q", zone)
	}
	z = dns.Fqdn(z)
	if _, ok := dns.IsDomainName(z); !ok {
		return "", fmt.Errorf("invalid zone %q", zone)
	}
	return z, nil
}

// display is the zone as written into the Corefile: no trailing dot.
func display(fqdn string) string { return strings.TrimSuffix(fqdn, ".") }

// lexAll returns the Corefile's words as CoreDNS's lexer reads them. The
// Dispenser neither follows imports nor replaces environment variables (only
// caddyfile.Parse does), so nothing of the operator's machine is read.
func lexAll(in string) []token {
	d := caddyfile.NewDispenser("Corefile", strings.NewReader(in))
	var toks []token
	for d.Next() {
		toks = append(toks, token{text: d.Val(), line: d.Line(), end: d.Line() + strings.Count(d.Val(), "\n")})
	}
	return toks
}

// key is one server block key, as CoreDNS reads it.
type key struct {
	zone     string // fully qualified, lower-case; "" for a reverse CIDR key
	plainDNS bool   // plain DNS: dns:// or no scheme
	port     string // "53" when the key has none
}

func parseKey(raw string) (key, error) {
	var k key
	s := strings.ToLower(raw)
	scheme := ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, s = s[:i], s[i+3:]
	}
	if strings.ContainsAny(s, "\x00{}") {
		return k, refuse("server block key %q uses an environment variable; cannot tell which zone it serves", raw)
	}
	if strings.Contains(s, "/") { // a reverse zone given as a CIDR
		return k, nil
	}
	host, port := s, ""
	if i := strings.LastIndex(s, ":"); i >= 0 {
		host, port = s[:i], s[i+1:]
	}
	k.zone = dns.Fqdn(cmp.Or(host, "."))
	k.plainDNS = scheme == "" || scheme == "dns"
	k.port = cmp.Or(port, "53")
	return k, nil
}

// directive is one directive of a server block: its tokens in order, the
// name first, then its arguments and its block.
type directive []token

// args are the words on the directive's first line, before any "{".
func (d directive) args() []token {
	for i, t := range d[1:] {
		if t.line != d[0].line || t.text == "{" {
			return d[1 : 1+i]
		}
	}
	return d[1:]
}

// options are the lines directly inside the directive's block, each as its
// words: the option's name, then its arguments.
func (d directive) options() [][]token {
	var out [][]token
	nesting := 0
	for i, t := range d {
		switch {
		case t.text == "{":
			nesting++
		case t.text == "}":
			nesting--
		case nesting != 1:
		case d[i-1].text == "{" || t.line != d[i-1].line:
			out = append(out, []token{t})
		case len(out) > 0:
			out[len(out)-1] = append(out[len(out)-1], t)
		}
	}
	return out
}

type block struct {
	keys []key
	raw  []string
	line int // the line of the first key
	dirs []directive
}

func (b *block) String() string {
	return fmt.Sprintf("server block %q (line %d)", strings.Join(b.raw, " "), b.line)
}

// named are b's directives called name, in order.
func (b *block) named(name string) []directive {
	var out []directive
	for _, d := range b.dirs {
		if d[0].text == name {
			out = append(out, d)
		}
	}
	return out
}

// names are the names of b's directives, each once, in order of appearance.
func (b *block) names() []string {
	var out []string
	for _, d := range b.dirs {
		if !slices.Contains(out, d[0].text) {
			out = append(out, d[0].text)
		}
	}
	return out
}

// best is how specific the block's most specific key for fqdn on port is:
// the number of labels of a key that is fqdn or a parent of it; -1 when none
// is.
func (b *block) best(fqdn, port string) int {
	n := -1
	for _, k := range b.keys {
		if k.plainDNS && k.port == port && k.zone != "" && dns.IsSubDomain(k.zone, fqdn) {
			n = max(n, dns.CountLabel(k.zone))
		}
	}
	return n
}

// parse groups the tokens as CoreDNS's parser does: server blocks with their
// keys, and in each its directives, each from a word that starts a line (or
// follows the block's "{") to the end of its line or of its own block. The
// import lines come back apart and are not followed. Snippets are left out:
// only an import brings them in. Unbalanced braces and a block without them,
// which caddyfile.Parse lets pass with a meaning of its own, are refused.
func parse(toks []token) ([]*block, [][]token, error) {
	var blocks []*block
	var imports [][]token
	var b *block // the block being read
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		starts := i == 0 || toks[i-1].end != t.line
		afterOpen := i > 0 && toks[i-1].text == "{" && depth == 1
		if t.text == "import" && (starts || afterOpen) && (depth > 0 || b == nil) {
			j := i + 1
			for j < len(toks) && toks[j].line == toks[j-1].end && toks[j].text != "}" {
				j++
			}
			imports = append(imports, toks[i:j])
			i = j - 1
			continue
		}
		switch {
		case depth == 0 && t.text == "{" && b != nil:
			depth = 1
		case depth == 0 && (t.text == "{" || t.text == "}"):
			return nil, nil, refuse("the Corefile does not parse: line %d: %q outside a server block", t.line, t.text)
		case depth == 0:
			if b != nil && starts && !strings.HasSuffix(toks[i-1].text, ",") {
				return nil, nil, refuse("the Corefile does not parse: line %d: server block keys without \"{\"", toks[i-1].line)
			}
			if b == nil {
				b = &block{line: t.line}
			}
			if r := strings.TrimSuffix(t.text, ","); r != "" {
				k, err := parseKey(r)
				if err != nil {
					return nil, nil, err
				}
				b.keys, b.raw = append(b.keys, k), append(b.raw, r)
			}
		case t.text == "}" && depth == 1:
			if !starts && toks[i-1].text != "{" {
				return nil, nil, refuse("the Corefile does not parse: line %d: \"}\" on the line of a directive", t.line)
			}
			if len(b.raw) != 1 || !strings.HasPrefix(b.raw[0], "(") || !strings.HasSuffix(b.raw[0], ")") {
				blocks = append(blocks, b)
			}
			b, depth = nil, 0
		case depth == 1 && (starts || afterOpen || len(b.dirs) == 0):
			b.dirs = append(b.dirs, nil)
			fallthrough
		default:
			b.dirs[len(b.dirs)-1] = append(b.dirs[len(b.dirs)-1], t)
			switch t.text {
			case "{":
				depth++
			case "}":
				depth--
			}
		}
	}
	if b != nil {
		return nil, nil, refuse("the Corefile does not parse: %s is not closed", b)
	}
	return blocks, imports, nil
}

// analyze is one run of editCorefile, for the fully qualified zone.
func analyze(in, fqdn string) (*edit, error) {
	zone := display(fqdn)
	all := lexAll(in)
	blocks, imports, err := parse(all)
	if err != nil {
		return nil, err
	}
	// A platform that puts its own Corefile back is refused first, whatever
	// the port.
	port, err := listening(blocks, fqdn, zone)
	if perr := platform(blocks, imports, zone, cmp.Or(port, "53")); perr != nil {
		return nil, perr
	}
	if err != nil {
		return nil, err
	}
	b, err := receiving(blocks, fqdn, zone, port)
	if err != nil {
		return nil, err
	}
	res := &edit{out: in, zone: zone, block: strings.Join(b.raw, " "), reload: len(b.named("reload")) > 0}
	for _, im := range imports {
		var args []string
		for _, t := range im[1:] {
			args = append(args, t.text)
		}
		res.notes = append(res.notes, fmt.Sprintf("line %d: \"import %s\" is not followed; what it brings in is not checked", im[0].line, strings.Join(args, " ")))
	}
	if res.line, err = alreadyThere(b, fqdn, zone); res.line > 0 || err != nil {
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	k, err := kubernetesOf(blocks, b, fqdn, zone, port)
	if err != nil {
		return nil, err
	}
	L := k[0].line
	res.line = L
	lines := strings.Split(in, "\n")
	if err := ownLine(all, lines, k[:1+len(k.args())], true, "the kubernetes directive"); err != nil {
		return nil, err
	}
	opts, inArgs, err := kubernetesMulticluster(k, b, fqdn, zone)
	if err != nil {
		return nil, err
	}
	if lines, err = withoutKubernetesMulticluster(all, lines, k, opts, inArgs, fqdn); err != nil {
		return nil, err
	}
	res.converted = inArgs
	res.notes = append(res.notes, alsoNamed(b, fqdn, zone)...)
	indent, eol := edges(lines[L-1])
	lines = slices.Insert(lines, L-1, indent+"multicluster "+zone+eol)
	res.out = strings.Join(lines, "\n")
	res.changed = true
	return res, nil
}

// listening is the port of the server blocks the DNS Service sends the
// zone to: 53, or, when no block on 53 receives the zone, the one other port
// where a block with a kubernetes directive receives it (OpenShift's 5353,
// Gardener's 8053: the Service maps 53 to it).
func listening(blocks []*block, fqdn, zone string) (string, error) {
	var ports, names []string
	for _, b := range blocks {
		if b.best(fqdn, "53") >= 0 {
			return "53", nil
		}
		for _, k := range b.keys {
			if b.best(fqdn, k.port) >= 0 && len(b.named("kubernetes")) > 0 && !slices.Contains(ports, k.port) {
				ports = append(ports, k.port)
				names = append(names, b.String())
			}
		}
	}
	switch len(ports) {
	case 0:
		return "", refuse("no server block receives %s on port 53, nor with a kubernetes directive on another port (none has the key \".\", %q or a parent of it); add \"multicluster %s\" by hand, or %s", zone, zone, zone, guide)
	case 1:
		return ports[0], nil
	}
	return "", refuse("no server block receives %s on port 53, and several on other ports do: %s; add \"multicluster %s\" by hand to the one the DNS Service sends port 53 to", zone, strings.Join(names, " and "), zone)
}

// receiving is the one server block that receives the zone on port: the
// most specific key wins.
func receiving(blocks []*block, fqdn, zone, port string) (*block, error) {
	best := -1
	for _, b := range blocks {
		best = max(best, b.best(fqdn, port))
		for _, k := range b.keys {
			if k.plainDNS && k.port == port && k.zone != fqdn && dns.IsSubDomain(fqdn, k.zone) {
				return nil, refuse("%s serves %s, a part of %s: those names would not reach the multicluster plugin; remove that block first, or %s", b, display(k.zone), zone, guide)
			}
		}
	}
	var catching []*block
	var names []string
	for _, b := range blocks {
		if b.best(fqdn, port) == best {
			catching = append(catching, b)
			names = append(names, b.String())
		}
	}
	if len(catching) > 1 {
		return nil, refuse("several server blocks receive %s: %s; add \"multicluster %s\" by hand to the one that should answer it", zone, strings.Join(names, " and "), zone)
	}
	return catching[0], nil
}

// standalone is the lasting way where the platform owns the Corefile.
const standalone = "Run the standalone Deployment (kubectl apply -f deploy/, or the chart deploy/chart/coredns-multicluster)"

// platform refuses the Corefiles of platforms that put their own Corefile
// and image back, which an edit would not outlast, and names the lasting
// way: the coredns-custom ConfigMap (AKS, k3s, Gardener, OVHcloud), or
// OpenShift's DNS operator, whose Corefile has a hostname.bind:5353 block.
// port is the port the zone's block listens on (Gardener's 8053: its custom
// server blocks listen there too).
func platform(blocks []*block, imports [][]token, zone, port string) error {
	for _, im := range imports {
		if len(im) < 2 {
			continue
		}
		dir, file := path.Split(im[1].text)
		if path.Base(dir) != "custom" || !slices.Contains([]string{"*.server", "*.override", "*.include"}, file) {
			continue
		}
		return refuse("line %d: \"import %s\" reads the coredns-custom ConfigMap of a platform that puts its own coredns ConfigMap and image back (AKS, k3s, Gardener, OVHcloud), so an edit here would not last. %s and forward %s to it from a \"%s:%s { ... }\" block under a *.server key of coredns-custom (deploy/forwarding.md, \"k3s and AKS: the coredns-custom ConfigMap\")",
			im[0].line, im[1].text, standalone, zone, zone, port)
	}
	for _, b := range blocks {
		if len(b.raw) == 1 && strings.EqualFold(b.raw[0], "hostname.bind:5353") && len(b.named("chaos")) > 0 {
			return refuse("%s marks a Corefile of OpenShift's DNS operator, which owns it (ConfigMap openshift-dns/dns-default) and the CoreDNS image and puts them back, so an edit here would not last. %s and add to spec.servers of dns.operator/default an entry forwarding %s to its Service address (deploy/forwarding.md, \"OpenShift: the DNS operator's servers\")",
				b, standalone, zone)
		}
	}
	return nil
}

// alreadyThere is the line of b's multicluster directive for the zone, 0
// when it has none; it refuses one for other zones only.
func alreadyThere(b *block, fqdn, zone string) (int, error) {
	mcs := b.named("multicluster")
	for _, d := range mcs {
		zones := zonesOf(d.args())
		if len(zones) == 0 {
			for _, k := range b.keys {
				zones = append(zones, k.zone)
			}
		}
		if slices.Contains(zones, fqdn) {
			return d[0].line, nil
		}
	}
	if len(mcs) > 0 {
		return 0, refuse("%s has a multicluster directive (line %d) for other zones; add %s to it by hand", b, mcs[0][0].line, zone)
	}
	return 0, nil
}

// kubernetesOf is b's one kubernetes directive, which the multicluster line
// goes before.
func kubernetesOf(blocks []*block, b *block, fqdn, zone, port string) (directive, error) {
	ks := b.named("kubernetes")
	if len(ks) == 0 {
		// Is there a kubernetes block the zone would have reached but for b?
		for _, o := range blocks {
			if ok := o.named("kubernetes"); o != b && o.best(fqdn, port) >= 0 && len(ok) > 0 {
				return nil, refuse("%s already takes %s (it has %s): CoreDNS sends the zone there, not to %s, whose kubernetes directive (line %d) the multicluster line would go before. If that block forwards the zone to the standalone Deployment, keep that set-up (deploy/README.md); to answer the zone in this CoreDNS instead, remove the block and run again",
					b, zone, describe(b), o, ok[0][0].line)
			}
		}
		return nil, refuse("%s receives %s but has no kubernetes directive to put \"multicluster %s\" before; add it by hand, or %s", b, zone, zone, guide)
	}
	if len(ks) > 1 {
		return nil, refuse("%s has %d kubernetes directives (lines %d and %d); CoreDNS accepts one", b, len(ks), ks[0][0].line, ks[1][0].line)
	}
	return ks[0], nil
}

// kubernetesMulticluster finds the kubernetes plugin's own multicluster
// options (CoreDNS >= 1.12: "multicluster [ZONES...]" inside its block, each
// zone one of its own) that name the zone, and whether the zone is among the
// directive's own zones, and refuses what cannot be edited safely.
func kubernetesMulticluster(k directive, b *block, fqdn, zone string) ([][]token, bool, error) {
	var opts [][]token
	for _, o := range k.options() {
		if o[0].text == "multicluster" && slices.Contains(zonesOf(o[1:]), fqdn) {
			opts = append(opts, o)
		}
	}
	L, kzones := k[0].line, zonesOf(k.args())
	inArgs := slices.Contains(kzones, fqdn)
	switch {
	case inArgs && len(opts) == 0:
		return nil, false, refuse("line %d: the kubernetes directive serves %s as a cluster zone of its own (without its multicluster option); remove %s from it by hand first, or %s", L, zone, zone, guide)
	case !inArgs && len(opts) > 0:
		return nil, false, refuse("line %d: the kubernetes plugin's multicluster option names %s, but the kubernetes directive (line %d) does not list it among its zones; fix that by hand first", opts[0][0].line, zone, L)
	case inArgs && len(kzones) == 1:
		return nil, false, refuse("line %d: %s is the only zone of the kubernetes directive; without it the directive would serve the server block's zones %q; change it by hand", L, zone, strings.Join(b.raw, " "))
	}
	return opts, inArgs, nil
}

// withoutKubernetesMulticluster takes the zone out of the kubernetes
// plugin's multicluster options and, when inArgs, out of its zones.
func withoutKubernetesMulticluster(all []token, lines []string, k directive, opts [][]token, inArgs bool, fqdn string) ([]string, error) {
	// Edit from the bottom up so that line numbers above stay valid.
	for i := len(opts) - 1; i >= 0; i-- {
		o, n := opts[i], opts[i][0].line
		if err := ownLine(all, lines, o, false, "the kubernetes plugin's multicluster option"); err != nil {
			return nil, err
		}
		var err error
		if slices.ContainsFunc(zonesOf(o[1:]), func(z string) bool { return z != fqdn }) {
			if lines[n-1], err = removeWords(lines[n-1], n, o, fqdn); err != nil {
				return nil, err
			}
			continue
		}
		// The option goes; the operator's comment after it stays.
		if sp, ok := spans(lines[n-1], o); ok {
			if c := strings.TrimSpace(lines[n-1][sp[len(sp)-1][1]:]); strings.HasPrefix(c, "#") {
				indent, eol := edges(lines[n-1])
				lines[n-1] = indent + c + eol
				continue
			}
		}
		lines = slices.Delete(lines, n-1, n)
	}
	if !inArgs {
		return lines, nil
	}
	var err error
	L := k[0].line
	lines[L-1], err = removeWords(lines[L-1], L, k[:1+len(k.args())], fqdn)
	return lines, err
}

// alsoNamed notes the other directives of b that name the zone.
func alsoNamed(b *block, fqdn, zone string) []string {
	var notes []string
	for _, n := range b.names() {
		for _, d := range b.named(n) {
			if n != "kubernetes" && slices.Contains(zonesOf(d[1:]), fqdn) {
				notes = append(notes, fmt.Sprintf("line %d: %s also names %s; left as it is", d[0].line, n, zone))
				break
			}
		}
	}
	return notes
}

// describe names a block's directives, for a message.
func describe(b *block) string {
	var parts []string
	for _, n := range b.names() {
		s := n
		for _, d := range b.named(n) {
			if a := d.args(); len(a) > 0 {
				s = n + " " + a[0].text
				if len(a) > 1 {
					s += " ..."
				}
				break
			}
		}
		parts = append(parts, fmt.Sprintf("%q", s))
	}
	if len(parts) == 0 {
		return "no directives"
	}
	return strings.Join(parts, ", ")
}

// zonesOf normalizes words as the kubernetes plugin does its zones.
func zonesOf(toks []token) []string {
	var out []string
	for _, t := range toks {
		out = append(out, dns.Fqdn(strings.ToLower(t.text)))
	}
	return out
}

// ownLine checks that the line of what (the directive or option's words)
// holds them and nothing else of the Corefile, but for the opening brace of
// the directive's block where brace: no server block key, brace or other
// directive, no quoted name.
func ownLine(all []token, lines []string, what []token, brace bool, name string) error {
	n := what[0].line
	var on []token
	for _, t := range all {
		if t.line <= n && t.end >= n {
			on = append(on, t)
		}
	}
	extra := on[min(len(what), len(on)):]
	ok := len(on) >= len(what) && slices.Equal(on[:len(what)], what) && on[len(on)-1].end == n &&
		(len(extra) == 0 || brace && len(extra) == 1 && extra[0].text == "{") &&
		!strings.HasPrefix(strings.TrimLeftFunc(lines[n-1], unicode.IsSpace), `"`)
	if !ok {
		return refuse("line %d: %s shares its line with other directives, options or a server block key (%q); put it on a line of its own and run again", n, name, strings.TrimSpace(lines[n-1]))
	}
	return nil
}

// edges are a line's indentation and its carriage return, if any.
func edges(l string) (indent, eol string) {
	return l[:len(l)-len(strings.TrimLeft(l, " \t"))], l[len(strings.TrimRight(l, "\r")):]
}

// spans finds words, tokens the lexer read from line, in it: where each
// starts, after blanks, and ends, quoted or not. ok is false unless each
// span lexes back to its word.
func spans(line string, words []token) ([][2]int, bool) {
	var out [][2]int
	i := 0
	for _, w := range words {
		j := strings.IndexFunc(line[i:], func(r rune) bool { return !unicode.IsSpace(r) })
		if j < 0 {
			return nil, false
		}
		start := i + j
		end := start + 1
		if line[start] == '"' {
			// The lexer's rule: a backslash escapes the next byte.
			for esc := false; end < len(line) && (esc || line[end] != '"'); end++ {
				esc = !esc && line[end] == '\\'
			}
			if end == len(line) {
				return nil, false // the quote closes on a later line
			}
			end++
		} else if k := strings.IndexFunc(line[start:], func(r rune) bool { return r == '#' || unicode.IsSpace(r) }); k >= 0 {
			end = start + k
		} else {
			end = len(line)
		}
		if t := lexAll(line[start:end]); len(t) != 1 || t[0].text != w.text {
			return nil, false
		}
		out = append(out, [2]int{start, end})
		i = end
	}
	return out, true
}

// removeWords removes from line n, which holds words, those after the first
// that are fqdn, each with the blanks before it; all else stays byte for
// byte, but that a blank takes the place of a quoted word that nothing
// parted from what follows it (`"zone"{`), which would glue to the word
// before it.
func removeWords(line string, n int, words []token, fqdn string) (string, error) {
	sp, ok := spans(line, words)
	if !ok {
		return "", refuse("line %d: cannot find the zone's word on the line", n)
	}
	for i := len(words) - 1; i >= 1; i-- {
		if dns.Fqdn(strings.ToLower(words[i].text)) == fqdn {
			rest, sep := line[sp[i][1]:], ""
			if r := strings.TrimRight(rest, "\r"); r != "" && !unicode.IsSpace(rune(r[0])) {
				sep = " "
			}
			line = line[:sp[i-1][1]] + sep + rest
		}
	}
	return line, nil
}

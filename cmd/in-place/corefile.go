package main

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/coredns/caddy/caddyfile"
	"github.com/miekg/dns"
)

// refusal is a change the command will not make; its message says where, why
// and what to do instead. The command exits 2 with it.
type refusal string

func (r refusal) Error() string { return string(r) }

func refuse(format string, args ...any) error { return refusal(fmt.Sprintf(format, args...)) }

func isRefusal(err error) bool {
	var r refusal
	return errors.As(err, &r)
}

type edit struct {
	out       string   // the Corefile to write; the input itself when !changed
	zone      string   // the zone as written: lower-case, no trailing dot
	changed   bool     // false: the multicluster directive is there already
	block     string   // the server block that receives the zone, as "key key"
	line      int      // the line of the kubernetes directive (of multicluster when !changed)
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

// editCorefile adds "multicluster ZONE" before the kubernetes directive of
// the server block that receives the zone and takes the zone out of that
// directive's own multicluster option (CoreDNS >= 1.12). Only those lines
// change; every other byte stays.
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

func normalizeZone(zone string) (string, error) {
	z := dns.Fqdn(strings.ToLower(strings.TrimSpace(zone)))
	if _, ok := dns.IsDomainName(z); !ok || z == "." || strings.ContainsAny(z, " \t\"#{}/:") {
		return "", fmt.Errorf("invalid zone %q", zone)
	}
	return z, nil
}

// display is the zone as written in the Corefile.
func display(fqdn string) string { return strings.TrimSuffix(fqdn, ".") }

// lexAll returns the Corefile's words. The Dispenser neither follows imports
// nor replaces environment variables (caddyfile.Parse does): nothing of the
// operator's machine is read.
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
	plainDNS bool   // dns:// or no scheme
	port     string // "53" when the key has none
}

func parseKey(raw string) (key, error) {
	scheme, s, ok := strings.Cut(strings.ToLower(raw), "://")
	if !ok {
		scheme, s = "", scheme
	}
	if strings.ContainsAny(s, "\x00{}") {
		return key{}, refuse("server block key %q uses an environment variable; cannot tell which zone it serves", raw)
	}
	if strings.Contains(s, "/") { // a reverse zone given as a CIDR
		return key{}, nil
	}
	host, port := s, ""
	if i := strings.LastIndex(s, ":"); i >= 0 {
		host, port = s[:i], s[i+1:]
	}
	return key{zone: dns.Fqdn(cmp.Or(host, ".")), plainDNS: scheme == "" || scheme == "dns", port: cmp.Or(port, "53")}, nil
}

// directive is a directive's words: its name, its arguments, its block.
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

// options are the lines directly inside the directive's block, as words.
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

func (b *block) named(name string) []directive {
	var out []directive
	for _, d := range b.dirs {
		if d[0].text == name {
			out = append(out, d)
		}
	}
	return out
}

// names are those of b's directives, each once.
func (b *block) names() []string {
	var out []string
	for _, d := range b.dirs {
		if !slices.Contains(out, d[0].text) {
			out = append(out, d[0].text)
		}
	}
	return out
}

// best is the number of labels of b's most specific key for fqdn on port:
// fqdn or a parent of it; -1 when none is.
func (b *block) best(fqdn, port string) int {
	n := -1
	for _, k := range b.keys {
		if k.plainDNS && k.port == port && k.zone != "" && dns.IsSubDomain(k.zone, fqdn) {
			n = max(n, dns.CountLabel(k.zone))
		}
	}
	return n
}

// parse groups the tokens as CoreDNS's parser does: server blocks with keys
// and directives, each directive from a word that starts a line (or follows
// the block's "{") to the end of its line or of its own block. Imports come
// back apart; snippets are left out (only an import brings them in).
// Unbalanced braces and keys without a block, which caddyfile.Parse lets
// pass with a meaning of its own, are refused.
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

// analyze is one run of editCorefile.
func analyze(in, fqdn string) (*edit, error) {
	zone := display(fqdn)
	all := lexAll(in)
	blocks, imports, err := parse(all)
	if err != nil {
		return nil, err
	}
	b, port, err := receiving(blocks, imports, fqdn, zone)
	if err != nil {
		return nil, err
	}
	res := &edit{out: in, zone: zone, block: strings.Join(b.raw, " "), reload: len(b.named("reload")) > 0}
	for _, im := range imports {
		res.notes = append(res.notes, fmt.Sprintf("line %d: \"import %s\" is not followed; what it brings in is not checked", im[0].line, strings.Join(texts(im[1:]), " ")))
	}
	// The plugin there already, for the zone (without arguments, the block's).
	mcs := b.named("multicluster")
	for _, d := range mcs {
		if slices.Contains(zonesOf(d.args()), fqdn) || len(d.args()) == 0 && slices.ContainsFunc(b.keys, func(k key) bool { return k.zone == fqdn }) {
			res.line = d[0].line
			return res, nil
		}
	}
	if len(mcs) > 0 {
		return nil, refuse("%s has a multicluster directive (line %d) for other zones; add %s to it by hand", b, mcs[0][0].line, zone)
	}
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
	k, lines := ks[0], strings.Split(in, "\n")
	if err := ownLine(all, lines, k[:1+len(k.args())], true, "the kubernetes directive"); err != nil {
		return nil, err
	}
	if lines, res.converted, err = convert(all, lines, k, b, fqdn, zone); err != nil {
		return nil, err
	}
	for _, n := range b.names() { // the other directives that name the zone
		if i := slices.IndexFunc(b.dirs, func(d directive) bool { return d[0].text == n && slices.Contains(zonesOf(d[1:]), fqdn) }); i >= 0 && n != "kubernetes" {
			res.notes = append(res.notes, fmt.Sprintf("line %d: %s also names %s; left as it is", b.dirs[i][0].line, n, zone))
		}
	}
	res.line, res.changed = k[0].line, true
	indent, eol := edges(lines[res.line-1])
	res.out = strings.Join(slices.Insert(lines, res.line-1, indent+"multicluster "+zone+eol), "\n")
	return res, nil
}

// receiving is the one server block the DNS Service sends the zone to, and
// its port: 53, or, when no block on 53 receives the zone, the one other
// port where a block with a kubernetes directive does (OpenShift's 5353,
// Gardener's 8053: the Service maps 53 to it). A platform that puts its own
// Corefile back is refused first.
func receiving(blocks []*block, imports [][]token, fqdn, zone string) (*block, string, error) {
	var ports, names []string
	for _, b := range blocks {
		if b.best(fqdn, "53") >= 0 {
			ports = []string{"53"}
			break
		}
		for _, k := range b.keys {
			if !slices.Contains(ports, k.port) && len(b.named("kubernetes")) > 0 && b.best(fqdn, k.port) >= 0 {
				ports, names = append(ports, k.port), append(names, b.String())
			}
		}
	}
	port, err := "53", error(nil)
	switch len(ports) {
	case 1:
		port = ports[0]
	case 0:
		err = refuse("no server block receives %s on port 53, nor with a kubernetes directive on another port (none has the key \".\", %q or a parent of it); add \"multicluster %s\" by hand, or %s", zone, zone, zone, guide)
	default:
		err = refuse("no server block receives %s on port 53, and several on other ports do: %s; add \"multicluster %s\" by hand to the one the DNS Service sends port 53 to", zone, strings.Join(names, " and "), zone)
	}
	if perr := platform(blocks, imports, zone, port); perr != nil || err != nil {
		return nil, "", cmp.Or(perr, err)
	}
	best, catching := -1, []*block(nil)
	for _, b := range blocks { // the most specific key wins
		for _, k := range b.keys {
			if k.plainDNS && k.port == port && k.zone != fqdn && dns.IsSubDomain(fqdn, k.zone) {
				return nil, "", refuse("%s serves %s, a part of %s: those names would not reach the multicluster plugin; remove that block first, or %s", b, display(k.zone), zone, guide)
			}
		}
		if n := b.best(fqdn, port); n > best {
			best, catching, names = n, []*block{b}, []string{b.String()}
		} else if n == best {
			catching, names = append(catching, b), append(names, b.String())
		}
	}
	if len(catching) > 1 {
		return nil, "", refuse("several server blocks receive %s: %s; add \"multicluster %s\" by hand to the one that should answer it", zone, strings.Join(names, " and "), zone)
	}
	return catching[0], port, nil
}

// standalone is the lasting way where the platform owns the Corefile.
const standalone = "Run the standalone Deployment (kubectl apply -f deploy/, or the chart deploy/chart/coredns-multicluster)"

// platform refuses the Corefiles of platforms that put their own Corefile
// and image back, which an edit would not outlast, and names the lasting
// way: the coredns-custom ConfigMap (AKS, k3s, Gardener, OVHcloud), whose
// blocks listen on port too, or OpenShift's DNS operator.
func platform(blocks []*block, imports [][]token, zone, port string) error {
	for _, im := range imports {
		if len(im) < 2 {
			continue
		}
		if dir, file := path.Split(im[1].text); path.Base(dir) == "custom" && slices.Contains([]string{"*.server", "*.override", "*.include"}, file) {
			return refuse("line %d: \"import %s\" reads the coredns-custom ConfigMap of a platform that puts its own coredns ConfigMap and image back (AKS, k3s, Gardener, OVHcloud), so an edit here would not last. %s and forward %s to it from a \"%s:%s { ... }\" block under a *.server key of coredns-custom (deploy/forwarding.md, \"k3s and AKS: the coredns-custom ConfigMap\")",
				im[0].line, im[1].text, standalone, zone, zone, port)
		}
	}
	for _, b := range blocks {
		if len(b.raw) == 1 && strings.EqualFold(b.raw[0], "hostname.bind:5353") && len(b.named("chaos")) > 0 {
			return refuse("%s marks a Corefile of OpenShift's DNS operator, which owns it (ConfigMap openshift-dns/dns-default) and the CoreDNS image and puts them back, so an edit here would not last. %s and add to spec.servers of dns.operator/default an entry forwarding %s to its Service address (deploy/forwarding.md, \"OpenShift: the DNS operator's servers\")",
				b, standalone, zone)
		}
	}
	return nil
}

// convert takes the zone out of the kubernetes plugin's own multicluster
// options ("multicluster [ZONES...]" in its block, each zone one of its own)
// and out of its zones, or refuses; converted is whether it did.
func convert(all []token, lines []string, k directive, b *block, fqdn, zone string) (_ []string, converted bool, _ error) {
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
	case !inArgs:
		return lines, false, nil
	}
	// From the bottom up, so that the line numbers above stay valid.
	for i := len(opts) - 1; i >= 0; i-- {
		o, n := opts[i], opts[i][0].line
		if err := ownLine(all, lines, o, false, "the kubernetes plugin's multicluster option"); err != nil {
			return nil, false, err
		}
		l := lines[n-1]
		if slices.ContainsFunc(zonesOf(o[1:]), func(z string) bool { return z != fqdn }) {
			if err := removeWords(lines, n, fqdn); err != nil {
				return nil, false, err
			}
		} else if _, comment := split(l); comment != "" {
			// The option goes; the operator's comment after it stays.
			indent, eol := edges(l)
			lines[n-1] = indent + strings.TrimSpace(comment) + eol
		} else {
			lines = slices.Delete(lines, n-1, n)
		}
	}
	return lines, true, removeWords(lines, L, fqdn)
}

// describe names a block's directives for a message.
func describe(b *block) string {
	var parts []string
	for _, n := range b.names() {
		if i := slices.IndexFunc(b.dirs, func(d directive) bool { return d[0].text == n && len(d.args()) > 0 }); i >= 0 {
			a := b.dirs[i].args()
			n += " " + a[0].text
			if len(a) > 1 {
				n += " ..."
			}
		}
		parts = append(parts, fmt.Sprintf("%q", n))
	}
	return cmp.Or(strings.Join(parts, ", "), "no directives")
}

// zonesOf normalizes words as the kubernetes plugin does its zones.
func zonesOf(toks []token) []string {
	var out []string
	for _, t := range toks {
		out = append(out, dns.Fqdn(strings.ToLower(t.text)))
	}
	return out
}

// ownLine checks that the line of what (a directive or option's words) holds
// nothing else, but the "{" of its block where brace, and no quoted name.
func ownLine(all []token, lines []string, what []token, brace bool, name string) error {
	n := what[0].line
	var on []token
	for _, t := range all {
		if t.line <= n && t.end >= n {
			on = append(on, t)
		}
	}
	ok := slices.Equal(on, what) || brace && slices.Equal(on, append(what[:len(what):len(what)], token{"{", n, n}))
	if !ok || on[len(on)-1].end != n || strings.HasPrefix(strings.TrimLeftFunc(lines[n-1], unicode.IsSpace), `"`) {
		return refuse("line %d: %s shares its line with other directives, options or a server block key (%q); put it on a line of its own and run again", n, name, strings.TrimSpace(lines[n-1]))
	}
	return nil
}

// edges are a line's indentation and its carriage return, if any.
func edges(l string) (indent, eol string) {
	return l[:len(l)-len(strings.TrimLeft(l, " \t"))], l[len(strings.TrimRight(l, "\r")):]
}

// split cuts line into its code and its comment: the comment starts at the
// first "#" before which the line lexes to all its words (a "#" in a quoted
// word does not).
func split(line string) (code, comment string) {
	all := texts(lexAll(line))
	for i := range len(line) {
		if line[i] == '#' && slices.Equal(texts(lexAll(line[:i])), all) {
			return line[:i], line[i:]
		}
	}
	return line, ""
}

// texts are the words of toks.
func texts(toks []token) []string {
	var out []string
	for _, t := range toks {
		out = append(out, t.text)
	}
	return out
}

// removeWords removes from line n the words after the first that are fqdn,
// each with the blanks before it; a blank takes the place of a word glued to
// what follows it (`"zone"{`). A cut is kept when the line lexes to one word
// less; the result must lex to the words that stay.
func removeWords(lines []string, n int, fqdn string) error {
	code, comment := split(lines[n-1])
	have := texts(lexAll(code))
	want := slices.Clone(have[:min(1, len(have))])
	for _, w := range have[min(1, len(have)):] {
		if dns.Fqdn(strings.ToLower(w)) != fqdn {
			want = append(want, w)
		}
	}
	re := regexp.MustCompile(`(?i)\s+"?` + regexp.QuoteMeta(display(fqdn)) + `\.?"?`)
	ms := re.FindAllStringIndex(code, -1)
	for i := len(ms) - 1; i >= 0; i-- {
		m, sep := ms[i], ""
		if m[1] < len(code) && !unicode.IsSpace(rune(code[m[1]])) {
			sep = " "
		}
		if c := code[:m[0]] + sep + code[m[1]:]; len(lexAll(c)) == len(lexAll(code))-1 {
			code = c
		}
	}
	// The sentinel after the line: no cut may leave a quote open.
	if !slices.Equal(texts(lexAll(code+"\nx")), append(want, "x")) {
		return refuse("line %d: cannot find the zone's word on the line", n)
	}
	lines[n-1] = code + comment
	return nil
}

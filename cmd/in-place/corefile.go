package main

import (
	"errors"
	"fmt"
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
// reads the Corefile with CoreDNS's parser (caddyfile) and changes only the
// lines it must; every other byte stays as it was. Import lines are not
// followed: no file on this machine is read.
func editCorefile(in, zone string) (*edit, error) {
	fqdn, err := normalizeZone(zone)
	if err != nil {
		return nil, err
	}
	a, err := analyze(in, fqdn)
	if err != nil {
		return nil, err
	}
	if !a.res.changed {
		return a.res, nil
	}
	// Check the result the way the next run reads it.
	b, err := analyze(a.res.out, fqdn)
	if err != nil {
		return nil, fmt.Errorf("internal error: the edited Corefile does not check out: %w", err)
	}
	if b.res.changed {
		return nil, errors.New("internal error: the edited Corefile does not check out: a second run would change it again")
	}
	return a.res, nil
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

type analysis struct {
	res *edit
}

// lexAll returns the Corefile's words as CoreDNS's lexer reads them; nothing
// is imported and no environment variable is replaced.
func lexAll(in string) []token {
	d := caddyfile.NewDispenser("Corefile", strings.NewReader(in))
	var toks []token
	for d.Next() {
		t := token{text: d.Val(), line: d.Line()}
		t.end = t.line + strings.Count(t.text, "\n")
		toks = append(toks, t)
	}
	return toks
}

// sanitize writes the words back, on their lines, without the import
// directives and with every environment reference {$VAR} or {%VAR%} made
// inert, so that caddyfile.Parse reads no file and no environment of the
// operator's machine. Line numbers stay those of the input.
func sanitize(toks []token) (string, []token, []string, error) {
	var b strings.Builder
	var kept []token
	var notes []string
	line, depth := 1, 0
	first := true
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		startsLine := i == 0 || toks[i-1].end != t.line
		if t.text == "import" && (startsLine || (toks[i-1].text == "{" && depth == 1)) {
			j := i + 1
			var args []string
			for ; j < len(toks) && toks[j].line == toks[j-1].end && toks[j].text != "}"; j++ {
				args = append(args, toks[j].text)
			}
			notes = append(notes, fmt.Sprintf("line %d: \"import %s\" is not followed; what it brings in is not checked", t.line, strings.Join(args, " ")))
			i = j - 1
			continue
		}
		switch t.text {
		case "{":
			depth++
		case "}":
			depth--
		}
		text := t.text
		if strings.Contains(text, "{$") || strings.Contains(text, "{%") {
			text = strings.NewReplacer("{$", "{\x00$", "{%", "{\x00%").Replace(text)
		}
		enc, err := encodeWord(text)
		if err != nil {
			return "", nil, nil, refuse("line %d: cannot read the word %q: %v", t.line, t.text, err)
		}
		for line < t.line {
			b.WriteByte('\n')
			line++
			first = true
		}
		if !first {
			b.WriteByte(' ')
		}
		b.WriteString(enc)
		first = false
		line += strings.Count(text, "\n")
		kept = append(kept, token{text: text, line: t.line, end: t.end})
	}
	b.WriteByte('\n')
	return b.String(), kept, notes, nil
}

// encodeWord writes a word so that the lexer reads it back unchanged.
func encodeWord(s string) (string, error) {
	bare := s != "" && !strings.HasPrefix(s, `"`) && !strings.ContainsRune(s, '#') &&
		strings.IndexFunc(s, unicode.IsSpace) < 0
	if bare {
		return s, nil
	}
	if strings.Contains(s, `\"`) || strings.HasSuffix(s, `\`) {
		return "", errors.New("a quoted word with a backslash before a quote")
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`, nil
}

// key is one server block key, as CoreDNS reads it.
type key struct {
	raw      string
	zone     string // fully qualified, lower-case; "" for a reverse CIDR key
	plainDNS bool   // plain DNS on port 53: dns:// or no scheme, port 53 or none
}

func parseKey(raw string) (key, error) {
	k := key{raw: raw}
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
	if host == "" {
		host = "."
	}
	k.zone = dns.Fqdn(host)
	k.plainDNS = (scheme == "" || scheme == "dns") && (port == "" || port == "53")
	return k, nil
}

// directive is one directive of a server block: its tokens in order, the
// name first.
type directive struct {
	name string
	toks []caddyfile.Token
}

// occurrences splits the tokens caddyfile.Parse grouped under one directive
// name into its occurrences.
func occurrences(name string, toks []caddyfile.Token) []directive {
	var out []directive
	nesting := 0
	for i, t := range toks {
		newLine := i == 0 || t.Line > toks[i-1].Line+strings.Count(toks[i-1].Text, "\n")
		if nesting == 0 && (i == 0 || newLine) && t.Text == name {
			out = append(out, directive{name: name})
		}
		switch t.Text {
		case "{":
			nesting++
		case "}":
			nesting--
		}
		if len(out) > 0 {
			out[len(out)-1].toks = append(out[len(out)-1].toks, t)
		}
	}
	return out
}

// args are the words on the directive's first line, before any "{".
func (d directive) args() []caddyfile.Token {
	var out []caddyfile.Token
	for _, t := range d.toks[1:] {
		if t.Line != d.toks[0].Line || t.Text == "{" {
			break
		}
		out = append(out, t)
	}
	return out
}

// option is one line inside a directive's block.
type option struct {
	name caddyfile.Token
	args []caddyfile.Token
}

// options are the lines directly inside the directive's block.
func (d directive) options() []option {
	var out []option
	nesting := 0
	for i, t := range d.toks {
		prev := d.toks[max(i-1, 0)]
		switch {
		case t.Text == "{":
			nesting++
			continue
		case t.Text == "}":
			nesting--
			continue
		}
		if nesting != 1 {
			continue
		}
		if prev.Text == "{" || t.Line != prev.Line {
			out = append(out, option{name: t})
		} else if len(out) > 0 {
			out[len(out)-1].args = append(out[len(out)-1].args, t)
		}
	}
	return out
}

type block struct {
	keys  []key
	raw   []string
	line  int // the line of the first key; 0 when unknown
	dirs  map[string][]directive
	names []string // directive names in order of appearance
}

func (b *block) String() string {
	if b.line > 0 {
		return fmt.Sprintf("server block %q (line %d)", strings.Join(b.raw, " "), b.line)
	}
	return fmt.Sprintf("server block %q", strings.Join(b.raw, " "))
}

// best is how specific the block's most specific key for fqdn is: the number
// of labels of a key that is fqdn or a parent of it; -1 when none is.
func (b *block) best(fqdn string) int {
	n := -1
	for _, k := range b.keys {
		if k.plainDNS && k.zone != "" && dns.IsSubDomain(k.zone, fqdn) {
			n = max(n, dns.CountLabel(k.zone))
		}
	}
	return n
}

func analyze(in, fqdn string) (*analysis, error) {
	zone := display(fqdn)
	all := lexAll(in)
	clean, kept, notes, err := sanitize(all)
	if err != nil {
		return nil, err
	}
	parsed, err := caddyfile.Parse("Corefile", strings.NewReader(clean), nil)
	if err != nil {
		return nil, refuse("the Corefile does not parse: %v", err)
	}
	blocks, err := serverBlocks(parsed, blockStarts(kept))
	if err != nil {
		return nil, err
	}
	b, err := receiving(blocks, fqdn, zone)
	if err != nil {
		return nil, err
	}
	res := &edit{out: in, block: strings.Join(b.raw, " "), notes: notes}
	_, res.reload = b.dirs["reload"]
	if done, err := alreadyThere(b, fqdn, zone, res); done || err != nil {
		if err != nil {
			return nil, err
		}
		return &analysis{res: res}, nil
	}
	k, err := kubernetesOf(blocks, b, fqdn, zone)
	if err != nil {
		return nil, err
	}
	L := k.toks[0].Line
	res.line = L
	lines := strings.Split(in, "\n")
	if err := ownLine(all, lines, L, k.toks[:1+len(k.args())], k.toks, "the kubernetes directive"); err != nil {
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
	kl := lines[L-1]
	indent := kl[:len(kl)-len(strings.TrimLeft(kl, " \t"))]
	eol := ""
	if strings.HasSuffix(kl, "\r") {
		eol = "\r"
	}
	lines = slices.Insert(lines, L-1, indent+"multicluster "+zone+eol)
	res.out = strings.Join(lines, "\n")
	res.changed = true
	return &analysis{res: res}, nil
}

// serverBlocks reads the parsed server blocks, their keys and directives,
// in the order of the lines they start at (starts, when it has them all).
func serverBlocks(parsed []caddyfile.ServerBlock, starts []int) ([]*block, error) {
	var blocks []*block
	for i, sb := range parsed {
		b := &block{raw: sb.Keys, dirs: map[string][]directive{}}
		if len(starts) == len(parsed) {
			b.line = starts[i]
		}
		for _, r := range sb.Keys {
			k, err := parseKey(r)
			if err != nil {
				return nil, err
			}
			b.keys = append(b.keys, k)
		}
		for name, toks := range sb.Tokens {
			if occ := occurrences(name, toks); len(occ) > 0 {
				b.dirs[name] = occ
				b.names = append(b.names, name)
			}
		}
		slices.SortFunc(b.names, func(x, y string) int {
			return b.dirs[x][0].toks[0].Line - b.dirs[y][0].toks[0].Line
		})
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// receiving is the one server block that receives the zone.
func receiving(blocks []*block, fqdn, zone string) (*block, error) {
	// The server block that receives the zone: the most specific key wins.
	best := -1
	for _, b := range blocks {
		best = max(best, b.best(fqdn))
	}
	if best < 0 {
		return nil, refuse("no server block on port 53 receives %s (none has the key \".\", %q or a parent of it); add \"multicluster %s\" by hand, or %s", zone, zone, zone, guide)
	}
	for _, b := range blocks {
		for _, k := range b.keys {
			if k.plainDNS && k.zone != fqdn && dns.IsSubDomain(fqdn, k.zone) {
				return nil, refuse("%s serves %s, a part of %s: those names would not reach the multicluster plugin; remove that block first, or %s", b, display(k.zone), zone, guide)
			}
		}
	}
	var catching []*block
	for _, b := range blocks {
		if b.best(fqdn) == best {
			catching = append(catching, b)
		}
	}
	if len(catching) > 1 {
		var names []string
		for _, b := range catching {
			names = append(names, b.String())
		}
		return nil, refuse("several server blocks receive %s: %s; add \"multicluster %s\" by hand to the one that should answer it", zone, strings.Join(names, " and "), zone)
	}
	return catching[0], nil
}

// alreadyThere says whether b has a multicluster directive for the zone
// already (its line in res), and refuses one for other zones only.
func alreadyThere(b *block, fqdn, zone string, res *edit) (bool, error) {
	mcs, ok := b.dirs["multicluster"]
	if !ok {
		return false, nil
	}
	for _, d := range mcs {
		zones := zonesOf(d.args())
		if len(zones) == 0 {
			for _, k := range b.keys {
				zones = append(zones, k.zone)
			}
		}
		if slices.Contains(zones, fqdn) {
			res.line = d.toks[0].Line
			return true, nil
		}
	}
	return false, refuse("%s has a multicluster directive (line %d) for other zones; add %s to it by hand", b, mcs[0].toks[0].Line, zone)
}

// kubernetesOf is b's one kubernetes directive, which the multicluster line
// goes before.
func kubernetesOf(blocks []*block, b *block, fqdn, zone string) (directive, error) {
	ks, ok := b.dirs["kubernetes"]
	if !ok {
		// Is there a kubernetes block the zone would have reached but for b?
		for _, o := range blocks {
			if o != b && o.best(fqdn) >= 0 && len(o.dirs["kubernetes"]) > 0 {
				return directive{}, refuse("%s already takes %s (it has %s): CoreDNS sends the zone there, not to %s, whose kubernetes directive (line %d) the multicluster line would go before. If that block forwards the zone to the standalone Deployment, keep that set-up (deploy/README.md); to answer the zone in this CoreDNS instead, remove the block and run again",
					b, zone, describe(b), o, o.dirs["kubernetes"][0].toks[0].Line)
			}
		}
		return directive{}, refuse("%s receives %s but has no kubernetes directive to put \"multicluster %s\" before; add it by hand, or %s", b, zone, zone, guide)
	}
	if len(ks) > 1 {
		return directive{}, refuse("%s has %d kubernetes directives (lines %d and %d); CoreDNS accepts one", b, len(ks), ks[0].toks[0].Line, ks[1].toks[0].Line)
	}
	return ks[0], nil
}

// kubernetesMulticluster finds the kubernetes plugin's own multicluster
// options (CoreDNS >= 1.12) that name the zone, and whether the zone is among
// the directive's own zones, and refuses what cannot be edited safely.
func kubernetesMulticluster(k directive, b *block, fqdn, zone string) ([]option, bool, error) {
	L := k.toks[0].Line
	// The kubernetes plugin's own multicluster option (CoreDNS >= 1.12):
	// "multicluster [ZONES...]" inside its block, each zone one of its own.
	var opts []option
	for _, o := range k.options() {
		if o.name.Text == "multicluster" && slices.Contains(zonesOf(o.args), fqdn) {
			opts = append(opts, o)
		}
	}
	kargs := k.args()
	inArgs := slices.Contains(zonesOf(kargs), fqdn)
	switch {
	case inArgs && len(opts) == 0:
		return nil, false, refuse("line %d: the kubernetes directive serves %s as a cluster zone of its own (without its multicluster option); remove %s from it by hand first, or %s", L, zone, zone, guide)
	case !inArgs && len(opts) > 0:
		return nil, false, refuse("line %d: the kubernetes plugin's multicluster option names %s, but the kubernetes directive (line %d) does not list it among its zones; fix that by hand first", opts[0].name.Line, zone, L)
	case inArgs && len(zonesOf(kargs)) == 1:
		return nil, false, refuse("line %d: %s is the only zone of the kubernetes directive; without it the directive would serve the server block's zones %q; change it by hand", L, zone, strings.Join(b.raw, " "))
	}
	return opts, inArgs, nil
}

// withoutKubernetesMulticluster takes the zone out of the kubernetes
// plugin's multicluster options and, when inArgs, out of its zones.
func withoutKubernetesMulticluster(all []token, lines []string, k directive, opts []option, inArgs bool, fqdn string) ([]string, error) {
	L := k.toks[0].Line
	kargs := k.args()
	// Edit from the bottom up so that line numbers above stay valid.
	for i := len(opts) - 1; i >= 0; i-- {
		o := opts[i]
		if err := ownLine(all, lines, o.name.Line, append([]caddyfile.Token{o.name}, o.args...), k.toks, "the kubernetes plugin's multicluster option"); err != nil {
			return nil, err
		}
		rest := slices.DeleteFunc(zonesOf(o.args), func(z string) bool { return z == fqdn })
		if len(rest) == 0 {
			if c := trailingComment(lines[o.name.Line-1]); c != "" {
				// The option goes, the operator's comment stays.
				l := lines[o.name.Line-1]
				eol := l[len(strings.TrimRight(l, "\r")):]
				lines[o.name.Line-1] = l[:len(l)-len(strings.TrimLeft(l, " \t"))] + c + eol
				continue
			}
			lines = slices.Delete(lines, o.name.Line-1, o.name.Line)
			continue
		}
		l, err := removeWords(lines[o.name.Line-1], o.args, fqdn)
		if err != nil {
			return nil, refuse("line %d: %v", o.name.Line, err)
		}
		lines[o.name.Line-1] = l
	}
	if inArgs {
		l, err := removeWords(lines[L-1], kargs, fqdn)
		if err != nil {
			return nil, refuse("line %d: %v", L, err)
		}
		lines[L-1] = l
	}
	return lines, nil
}

// alsoNamed notes the other directives of b that name the zone.
func alsoNamed(b *block, fqdn, zone string) []string {
	var notes []string
	for _, n := range b.names {
		if n == "kubernetes" {
			continue
		}
		for _, d := range b.dirs[n] {
			if slices.Contains(zonesOf(d.toks[1:]), fqdn) {
				notes = append(notes, fmt.Sprintf("line %d: %s also names %s; left as it is", d.toks[0].Line, n, zone))
				break
			}
		}
	}
	return notes
}

// describe names a block's directives, for a message.
func describe(b *block) string {
	var parts []string
	for _, n := range b.names {
		s := n
		for _, d := range b.dirs[n] {
			if a := d.args(); len(a) > 0 {
				s = n + " " + a[0].Text
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
func zonesOf(toks []caddyfile.Token) []string {
	var out []string
	for _, t := range toks {
		out = append(out, dns.Fqdn(strings.ToLower(t.Text)))
	}
	return out
}

// blockStarts gives the line of each server block's first key, skipping
// snippets, in the order caddyfile.Parse returns the blocks.
func blockStarts(toks []token) []int {
	var out []int
	depth := 0
	between := true
	snippet := false
	for _, t := range toks {
		switch {
		case t.text == "{":
			depth++
			between = false
		case t.text == "}":
			depth--
			if depth == 0 {
				between = true
			}
		case depth == 0 && between:
			between = false
			snippet = strings.HasPrefix(t.text, "(")
			if !snippet {
				out = append(out, t.line)
			}
		}
	}
	return out
}

// ownLine checks that line n holds what (the directive or option) and nothing
// else of the Corefile: no server block key, brace or other directive.
func ownLine(all []token, lines []string, n int, what, owner []caddyfile.Token, name string) error {
	var onLine []token
	for _, t := range all {
		if t.line <= n && t.end >= n {
			onLine = append(onLine, t)
		}
	}
	ok := len(onLine) >= len(what) && onLine[0].line == n
	if ok {
		for i, t := range onLine {
			if i < len(what) {
				ok = ok && t.text == what[i].Text && t.line == what[i].Line
				continue
			}
			// After the words: only the opening brace of the owner's block.
			ok = ok && t.text == "{" && name == "the kubernetes directive" && i == len(what) && containsTok(owner, t)
		}
	}
	if ok {
		spans, err := lexLine(lines[n-1])
		ok = err == nil && len(spans) == len(onLine) && spans[0].text == what[0].Text && lines[n-1][spans[0].start] != '"'
	}
	if !ok {
		return refuse("line %d: %s shares its line with other directives, options or a server block key (%q); put it on a line of its own and run again", n, name, strings.TrimSpace(lines[n-1]))
	}
	return nil
}

func containsTok(toks []caddyfile.Token, t token) bool {
	for _, x := range toks {
		if x.Line == t.line && x.Text == t.text {
			return true
		}
	}
	return false
}

// span is one word of a line: its bytes [start, end) and its text as the
// lexer reads it.
// trailingComment is the comment after a line's words, "" when it has none.
func trailingComment(line string) string {
	spans, err := lexLine(line)
	if err != nil || len(spans) == 0 {
		return ""
	}
	rest := strings.TrimSpace(line[spans[len(spans)-1].end:])
	if !strings.HasPrefix(rest, "#") {
		return ""
	}
	return rest
}

type span struct {
	start, end int
	text       string
}

// lexLine splits one line into words exactly as CoreDNS's lexer does (quotes,
// escaped quotes, a # starting a comment anywhere) and says where each is.
func lexLine(s string) ([]span, error) {
	var out []span
	i := 0
	for i < len(s) {
		r := rune(s[i])
		if r == ' ' || r == '\t' || r == '\r' || r == '\v' || r == '\f' {
			i++
			continue
		}
		if r == '#' {
			break
		}
		start := i
		if r == '"' {
			var val []byte
			escaped := false
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if !escaped {
					if c == '\\' {
						escaped = true
						continue
					} else if c == '"' {
						closed = true
						break
					}
				}
				if escaped && c != '"' {
					val = append(val, '\\')
				}
				val = append(val, c)
				escaped = false
			}
			if !closed {
				return nil, errors.New("a quoted word runs past the line")
			}
			out = append(out, span{start, i, string(val)})
			continue
		}
		comment := false
		for i < len(s) && !strings.ContainsRune(" \t\r\v\f", rune(s[i])) {
			if s[i] == '#' {
				comment = true
				break
			}
			i++
		}
		out = append(out, span{start, i, s[start:i]})
		if comment {
			break
		}
	}
	return out, nil
}

// removeWords removes from line the words among args that are fqdn, each
// with the blanks before it; all else stays byte for byte.
func removeWords(line string, args []caddyfile.Token, fqdn string) (string, error) {
	spans, err := lexLine(line)
	if err != nil {
		return "", err
	}
	if len(spans) < 1+len(args) {
		return "", errors.New("cannot find the zone's word on the line")
	}
	out := line
	for i := len(args); i >= 1; i-- {
		a, sp := args[i-1], spans[i]
		if sp.text != a.Text {
			return "", errors.New("cannot find the zone's word on the line")
		}
		if dns.Fqdn(strings.ToLower(a.Text)) != fqdn {
			continue
		}
		out = out[:spans[i-1].end] + out[sp.end:]
	}
	return out, nil
}

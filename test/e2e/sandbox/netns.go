package sandbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Netns is a network namespace of a test's own, joined to this process's
// namespace by a veth pair with a /30 of its own: HostIP on this side, IP
// inside. A process started in it (CoreDNSOptions.Netns) reaches this side
// only across the pair, so packets dropped on the pair (Drop) are lost to
// it as on a partitioned network: no reset, no refusal, only silence.
// Needs root, iproute2 and iptables.
type Netns struct {
	Name   string // as `ip netns` knows it
	Path   string // /var/run/netns/Name
	HostIP string // this side of the pair
	IP     string // the namespace's side

	hostLink string
	mu       sync.Mutex
	rules    []rule // the drop rules in place
}

// rule is one iptables rule, in this namespace when netns is empty.
type rule struct {
	netns string
	spec  []string
}

// NewNetns makes a network namespace and its veth pair, removed when t ends.
func NewNetns(t testing.TB) (*Netns, error) {
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not installed (apt-get install iproute2 iptables): %w", tool, err)
		}
	}
	// A /30 out of 10.213.0.0/16 that no interface here has: tests that
	// run in parallel pick different ones.
	var hostIP, nsIP net.IP
	for range 20 {
		n := rand.IntN(1 << 14)
		hostIP = net.IPv4(10, 213, byte(n>>6), byte(n&63)<<2|1)
		nsIP = net.IPv4(10, 213, byte(n>>6), byte(n&63)<<2|2)
		if !addressInUse(hostIP) {
			break
		}
		hostIP = nil
	}
	if hostIP == nil {
		return nil, errors.New("no free /30 in 10.213.0.0/16 for a veth pair")
	}
	tag := strconv.Itoa(rand.IntN(1 << 20))
	n := &Netns{Name: "e2e-" + tag, HostIP: hostIP.String(), IP: nsIP.String(), hostLink: "e2eh" + tag}
	n.Path = filepath.Join("/var/run/netns", n.Name)
	peer := "e2ep" + tag
	t.Cleanup(func() {
		_ = n.Allow()
		_ = run("ip", "link", "del", n.hostLink)
		_ = run("ip", "netns", "del", n.Name)
	})
	for _, argv := range [][]string{
		{"ip", "netns", "add", n.Name},
		{"ip", "link", "add", n.hostLink, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", peer, "netns", n.Name},
		{"ip", "addr", "add", n.HostIP + "/30", "dev", n.hostLink},
		{"ip", "link", "set", n.hostLink, "up"},
		{"ip", "-n", n.Name, "addr", "add", n.IP + "/30", "dev", peer},
		{"ip", "-n", n.Name, "link", "set", peer, "up"},
		{"ip", "-n", n.Name, "link", "set", "lo", "up"},
	} {
		if err := run(argv...); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func addressInUse(ip net.IP) bool {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, ok := a.(*net.IPNet); ok && p.Contains(ip) {
			return true
		}
	}
	return false
}

// Forward listens on HostIP and forwards every connection to target, an
// address of this namespace such as the API server's 127.0.0.1:port: the
// namespace reaches target at the address returned, across the pair. The
// listener and its connections close when t ends.
func (n *Netns) Forward(t testing.TB, target string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(n.HostIP, "0"))
	if err != nil {
		return "", err
	}
	t.Cleanup(forward(l, func() (net.Conn, error) { return net.Dial("tcp", target) }))
	return l.Addr().String(), nil
}

// Drop drops every TCP packet to and from port on HostIP across the pair,
// both ways, until Allow: each side's INPUT chain drops what the other
// sends, so neither sends a reset or an ICMP error, and neither one's own
// sends fail.
func (n *Netns) Drop(port int) error {
	p := strconv.Itoa(port)
	rules := []rule{
		{spec: []string{"INPUT", "-i", n.hostLink, "-d", n.HostIP, "-p", "tcp", "--dport", p, "-j", "DROP"}},
		{netns: n.Name, spec: []string{"INPUT", "-s", n.HostIP, "-p", "tcp", "--sport", p, "-j", "DROP"}},
	}
	for _, r := range rules {
		if err := r.iptables("-I"); err != nil {
			return err
		}
		n.mu.Lock()
		n.rules = append(n.rules, r)
		n.mu.Unlock()
	}
	return nil
}

// Allow removes the rules Drop put in place.
func (n *Netns) Allow() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for _, r := range n.rules {
		errs = append(errs, r.iptables("-D"))
	}
	n.rules = nil
	return errors.Join(errs...)
}

func (r rule) iptables(op string) error {
	argv := append([]string{"iptables", "-w", op}, r.spec...)
	if r.netns != "" {
		argv = append([]string{"ip", "netns", "exec", r.netns}, argv...)
	}
	return run(argv...)
}

func run(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

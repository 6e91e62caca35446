//go:build ignore

// Command snapshot is hack/run.sh's first server: it answers the objects of
// testdata/ on 127.0.0.1 within minutes of a cold start, long before the
// kube-apiserver devenv runs is built. The objects go straight to the
// plugin's snapshot builder (cache.Config.Static: the Controller's
// conversion and building) and the answers come from the plugin's handler
// in CoreDNS's own DNS server (dnsserver.Server), so they are the plugin's
// answers, with no API server, informer or Corefile in between.
//
// It is not part of devenv's package (the build tag): hack/run.sh builds it
// with shared.go from the plugin's module, whose go.mod holds CoreDNS (the
// e2e module's does not), and which the CoreDNS devenv builds next shares:
//
//	go build -o .cache/devenv-snapshot ./test/e2e/cmd/devenv/snapshot.go ./test/e2e/cmd/devenv/shared.go
//
// It serves until it is stopped (SIGINT, SIGTERM, or its parent's exit), or
// until devenv has started CoreDNS beside it on the same port and sends
// SIGUSR1: it then hands every query over to CoreDNS (handOver) and exits.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	multicluster "github.com/clustersetdns/multicluster"
	"github.com/clustersetdns/multicluster/internal/contract"
)

func main() {
	// A flag set of its own: CoreDNS's packages add flags to the global one.
	fs := flag.NewFlagSet("snapshot", flag.ExitOnError)
	port := fs.Int("port", 1053, "DNS port on 127.0.0.1 (UDP and TCP)")
	ttl := fs.Int("ttl", 0, "the plugin's ttl option; its default when 0")
	testdata := fs.String("testdata", "testdata", "directory of YAML objects to serve")
	fs.Bool("v", false, "no effect: taken because hack/run.sh passes devenv's flags here too")
	_ = fs.Parse(os.Args[1:])
	if err := run(*port, *ttl, *testdata); err != nil {
		fmt.Fprintln(os.Stderr, "snapshot:", err)
		os.Exit(1)
	}
}

func run(port, ttl int, testdata string) error {
	// Before anything can fail or take long, so that devenv's SIGUSR1
	// never kills it, and it never outlives the process that started it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1, os.Interrupt, syscall.SIGTERM)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return err
	}

	objs, err := contract.ReadObjects(testdata)
	if err != nil {
		return err
	}
	if ttl == 0 {
		ttl = multicluster.DefaultTTL
	}
	st, err := answers(objs, uint32(ttl))
	if err != nil {
		return fmt.Errorf("%s: %w", testdata, err)
	}
	digs := digCommands(port, st)
	if err := portFree(port); err != nil {
		return err
	}
	srv, conns, err := serve(port, multicluster.NewWithBackend([]string{zone}, uint32(ttl), st))
	if err != nil {
		return err
	}
	fmt.Printf(`
snapshot: serving testdata from the snapshot builder (no API server yet): the
plugin's answers to the %d objects of %s, clusterset.local on 127.0.0.1:%d.
CoreDNS with the plugin watching a real kube-apiserver takes over once that
is built and started. Try:
%s
`, len(objs), testdata, port, digs)

	if <-sigs == syscall.SIGUSR1 {
		if err := handOver(conns); err != nil {
			fmt.Fprintln(os.Stderr, "snapshot:", err)
		}
		fmt.Println("snapshot: handed the port over to CoreDNS")
	}
	return srv.Stop()
}

// serve starts CoreDNS's DNS server for zone on 127.0.0.1:port, its plugin
// chain a query log and m, as a Corefile block `zone:port { bind 127.0.0.1;
// multicluster }` would, and returns it with its UDP and TCP sockets. Those
// are bound with SO_REUSEPORT (dnsserver's Listen), as CoreDNS binds its
// own, so that CoreDNS can bind the port beside them later.
func serve(port int, m *multicluster.Multicluster) (*dnsserver.Server, []syscall.Conn, error) {
	cfg := &dnsserver.Config{Zone: zone + ".", ListenHosts: []string{"127.0.0.1"}, Port: strconv.Itoa(port)}
	cfg.AddPlugin(func(next plugin.Handler) plugin.Handler { return queryLog{next} })
	cfg.AddPlugin(func(next plugin.Handler) plugin.Handler { m.Next = next; return m })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	srv, err := dnsserver.NewServer("dns://"+addr, []*dnsserver.Config{cfg})
	if err != nil {
		return nil, nil, err
	}
	pc, err := srv.ListenPacket()
	if err != nil {
		return nil, nil, err
	}
	l, err := srv.Listen()
	if err != nil {
		pc.Close()
		return nil, nil, err
	}
	go srv.ServePacket(pc)
	go srv.Serve(l)
	return srv, []syscall.Conn{pc.(syscall.Conn), l.(syscall.Conn)}, nil
}

// handOver makes the kernel deliver every new query and connection on the
// port to CoreDNS's socket, lets this server answer what it has received
// already, and returns. A classic BPF program on a socket steers its whole
// SO_REUSEPORT group: it returns the index of the socket to deliver to,
// which is the order they joined in. This server bound the port first
// (portFree made sure it was free), CoreDNS next, so index 1 is CoreDNS's.
// Closing without it would drop what the kernel had queued for this socket.
// Where a kernel refuses the program (some sandboxes do for TCP), closing
// still hands over; only what arrives in that instant can be lost.
func handOver(conns []syscall.Conn) error {
	toSecond := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 1}}
	prog := unix.SockFprog{Len: uint16(len(toSecond)), Filter: &toSecond[0]}
	var errs []error
	for _, c := range conns {
		var err error
		raw, cerr := c.SyscallConn()
		if cerr == nil {
			cerr = raw.Control(func(fd uintptr) {
				err = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog)
			})
		}
		if err = cmp.Or(cerr, err); err == nil {
			continue
		}
		// Closed now, a listener leaves the kernel CoreDNS's for new
		// connections, and those it took finish; waiting for Stop would
		// give it more, and Stop cuts them off.
		if l, ok := c.(net.Listener); ok {
			l.Close()
			err = fmt.Errorf("steering TCP to CoreDNS: %w; closed the TCP listener instead", err)
		} else {
			err = fmt.Errorf("steering UDP to CoreDNS: %w", err)
		}
		errs = append(errs, err)
	}
	// What was queued before the program took effect is read and
	// answered within microseconds; Stop then waits for the answers.
	time.Sleep(500 * time.Millisecond)
	return errors.Join(errs...)
}

// queryLog prints one line per query, as the log plugin does in devenv's
// CoreDNS, so that which server answered each dig shows.
type queryLog struct{ next plugin.Handler }

func (q queryLog) Name() string { return "log" }

func (q queryLog) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	rec := dnstest.NewRecorder(w)
	rc, err := plugin.NextOrFailure(q.Name(), q.next, ctx, rec, r)
	if rec.Msg != nil {
		rc = rec.Rcode
	}
	state := request.Request{W: w, Req: r}
	fmt.Printf("snapshot: %s - %d \"%s IN %s %s\" %s\n",
		state.RemoteAddr(), r.Id, state.Type(), state.Name(), state.Proto(), dns.RcodeToString[rc])
	return rc, err
}

package harness

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// InNetns runs f on an OS thread of its own that has joined the network
// namespace at path (such as /var/run/netns/NAME, from `ip netns add`), then
// returns the thread to this process's network namespace. Sockets f opens
// stay in that namespace and may be used from any goroutine; processes f
// starts with os/exec are forked from that thread and run in it too. Needs
// CAP_SYS_ADMIN.
func InNetns(path string, f func() error) error {
	home, err := os.Open("/proc/thread-self/ns/net") // every unlocked thread's
	if err != nil {
		return err
	}
	defer home.Close()
	ns, err := os.Open(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("joining the network namespace %s: %w", path, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked, so it ends with this goroutine
			// rather than serve others in the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("leaving the network namespace %s: %w", path, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

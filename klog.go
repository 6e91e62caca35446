package multicluster

import (
	"sync"

	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

// klogSink is the logr sink that klog hands client-go's logs to, so that
// they come out as CoreDNS log lines of this plugin, one stream with its
// own, rather than in klog's format on stderr. go-logr's funcr formats the
// key/value pairs. The kubernetes plugin routes klog the same way; in a
// binary with both, the plugin set up last names the lines.
type klogSink struct {
	funcr.Formatter
	p clog.P
}

func newKlogSink(p clog.P) *klogSink {
	noLevel := ""
	return &klogSink{Formatter: funcr.NewFormatter(funcr.Options{LogInfoLevel: &noLevel}), p: p}
}

// routeKlog sends klog's output, client-go's, to the plugin's logger, once
// per process: klog.SetLogger is not safe while informers log, and a reload
// sets the plugin up again while the old instance's informers still run.
func routeKlog() { klogOnce.Do(func() { klog.SetLogger(logr.New(newKlogSink(log))) }) }

var klogOnce sync.Once

func (s *klogSink) Info(level int, msg string, kv ...any) {
	_, args := s.FormatInfo(level, msg, kv)
	s.p.Info(args)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	_, args := s.FormatError(err, msg, kv)
	s.p.Error(args)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.AddValues(kv)
	return &c
}

func (s *klogSink) WithName(name string) logr.LogSink {
	c := *s
	c.AddName(name)
	return &c
}

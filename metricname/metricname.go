// Package metricname names the metrics the multicluster plugin exports, their
// labels and label values, and the CoreDNS metrics its dashboard and alerts
// read beside them.
//
// It is the one place these names are spelled: metrics.go registers the
// metrics under them, and the generator of deploy/monitoring
// (hack/tools/monitoring) writes the dashboard's and the alerting rules'
// queries from them, so a renamed metric changes both or fails to build. The
// package imports nothing, so that the generator's module can use it without
// the plugin's dependencies.
package metricname

// Subsystem is the plugin's part of its metrics' names, declared as
// CoreDNS's plugins declare theirs: Namespace plugin.Namespace ("coredns"),
// Subsystem, and one of the Names below.
const Subsystem = "multicluster"

// prefix is what the Namespace and Subsystem make of a name: "coredns" is
// CoreDNS's plugin.Namespace (this package imports nothing; the plugin's
// TestMetricNames checks every registered name is one of the full ones).
const prefix = "coredns_" + Subsystem + "_"

// The plugin's metrics' names within the namespace and subsystem, for their
// declarations.
const (
	ResponsesName       = "responses_total"
	ServiceImportsName  = "serviceimports"
	EndpointsName       = "endpoints"
	UnreadVersionsName  = "unread_versions"
	SkippedObjectsName  = "skipped_objects_total"
	SyncedName          = "synced"
	HeadlessAnswersName = "headless_answers_total"

	ClusterLastChangeName = "cluster_last_change_timestamp_seconds"
)

// The plugin's metrics' full names, for queries.
const (
	// Responses counts answers in the plugin's zones, by Server and Result.
	Responses = prefix + ResponsesName
	// ServiceImports is the number of services answered, by the Version of
	// the ServiceImport their answers come from.
	ServiceImports = prefix + ServiceImportsName
	// Endpoints is the number of ready headless endpoint names answered, by
	// the Cluster they come from: a series only for clusters with some.
	Endpoints = prefix + EndpointsName
	// UnreadVersions is 1 for a Version the API server serves whose shape the
	// configuration reads through no version, else 0.
	UnreadVersions = prefix + UnreadVersionsName
	// SkippedObjects counts objects, or parts of them, left out because they
	// are unusable, by Kind and Reason.
	SkippedObjects = prefix + SkippedObjectsName
	// Synced is 1 once the plugin has listed everything it watches and
	// answers from it, 0 before (when it answers SERVFAIL).
	Synced = prefix + SyncedName
	// HeadlessAnswers counts answers at a headless service's name and port
	// names, by Scope: the local cluster's endpoints only, or every cluster's.
	HeadlessAnswers = prefix + HeadlessAnswersName
	// ClusterLastChange is when an EndpointSlice of each source Cluster was
	// last seen added, changed or deleted, in seconds since the epoch: a
	// series only for clusters with EndpointSlices. The plugin's first list
	// counts as a change.
	ClusterLastChange = prefix + ClusterLastChangeName
)

// Full lists the plugin's metrics' full names.
var Full = []string{Responses, ServiceImports, Endpoints, UnreadVersions, SkippedObjects, Synced, HeadlessAnswers, ClusterLastChange}

// Labels of the plugin's metrics.
const (
	Server  = "server"  // Responses: the server block, as CoreDNS's metrics name it
	Result  = "result"  // Responses: one of the Result values
	Version = "version" // ServiceImports, UnreadVersions: v1alpha1, v1beta1, v1alpha2
	Kind    = "kind"    // SkippedObjects: ServiceImport or EndpointSlice
	Reason  = "reason"  // SkippedObjects: why it was left out
	Scope   = "scope"   // HeadlessAnswers: ScopeLocal or ScopeClusterset
	Cluster = "cluster" // Endpoints, ClusterLastChange: a source cluster's ID, or OtherClusters
)

// OtherClusters is the Cluster label of the clusters past the most the
// plugin exports apart (cache.MaxClusterSeries), together: no cluster ID
// has an underscore.
const OtherClusters = "_other"

// Values of the Scope label.
const (
	ScopeLocal      = "local"      // the local cluster's ready endpoints only
	ScopeClusterset = "clusterset" // every cluster's ready endpoints
)

// Values of the Result label.
const (
	Success       = "success"
	NameError     = "NXDOMAIN"
	NoData        = "NODATA"
	ServerFailure = "SERVFAIL"
)

// Values of the Version label: the ServiceImport versions, in the shape they
// read. V1alpha1 and V1beta1 read the spec/status shape, V1alpha2 the root
// shape.
const (
	V1alpha1 = "v1alpha1"
	V1beta1  = "v1beta1"
	V1alpha2 = "v1alpha2"
)

// CoreDNS's own metrics (its prometheus plugin), read beside the plugin's.
const (
	// RequestDuration is the histogram of request handling time by server,
	// zone, view and type; its series are RequestDuration + "_bucket",
	// "_sum" and "_count".
	RequestDuration = "coredns_dns_request_duration_seconds"
	// Requests counts requests by server, zone, view, proto, family and type.
	Requests = "coredns_dns_requests_total"
	// PluginEnabled is 1 for each plugin, by server, zone, view and name,
	// that a server block runs.
	PluginEnabled = "coredns_plugin_enabled"
	// Panics counts panics CoreDNS recovered from.
	Panics = "coredns_panics_total"
	// ResidentMemory is the process's resident memory (the Go client's
	// process collector).
	ResidentMemory = "process_resident_memory_bytes"
	// ProcessStart is when the process started, in seconds since the epoch.
	ProcessStart = "process_start_time_seconds"
	// Zone is the label of CoreDNS's request metrics that holds the zone
	// that answered, fully qualified ("clusterset.local.").
	Zone = "zone"
	// Name is the label of PluginEnabled that holds the plugin's name.
	Name = "name"
	// Plugin is the value of Name for this plugin.
	Plugin = "multicluster"
)

//go:build e2e

package e2e

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	HandleSignals()
	code := m.Run()
	RemoveBuiltBin()
	PrintSummary(os.Stdout)
	os.Exit(code)
}

// scenarios in issue order; each builds its own cluster, so any one runs
// alone: go test -tags e2e -run 'TestE2E/replica_kill' ./test/e2e/
var scenarios = []struct {
	name string
	run  func(t *testing.T)
}{
	{"cluster_forms", testClusterForms},             // 1
	{"replica_kill", testReplicaKill},               // 2
	{"replica_stop", testReplicaStop},               // 3
	{"link_down", testLinkDown},                     // 4
	{"agent_kill", testAgentKill},                   // 5
	{"agent_restart", testAgentRestart},             // 6
	{"partition", testPartition},                    // 7
	{"switchover", testSwitchover},                  // 8
	{"replication_stopped", testReplicationStopped}, // 10
	{"wrong_key", testWrongKey},                     // 11
	{"hung_hook", testHungHook},                     // 12
	{"galera", testGalera},                          // issue 17: a real Galera cluster
	{"stability", testStability},                    // 9: the longest, last
}

func TestE2E(t *testing.T) {
	Require(t)
	for _, sc := range scenarios {
		t.Run(sc.name, sc.run)
	}
}

// TestE2EClean removes namespaces left by dead runs (make e2e-clean). It
// only runs with SHOAL_E2E_CLEAN=1, so that a normal run never touches
// another run's namespaces; even then it keeps every run with a live
// process or a namespace newer than this test.
func TestE2EClean(t *testing.T) {
	if os.Getenv("SHOAL_E2E_CLEAN") != "1" {
		t.Skip("set SHOAL_E2E_CLEAN=1 to delete namespaces left by dead e2e runs")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	deleted, left, err := Sweep(time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deleted {
		t.Logf("deleted %s", d)
	}
	for _, l := range left {
		t.Logf("left %s", l)
	}
}

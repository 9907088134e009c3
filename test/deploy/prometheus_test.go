package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	alertsFile      = "deploy/prometheus/alerts.yml"
	alertsTestFile  = "deploy/prometheus/alerts_test.yml"
	prometheusFile  = "deploy/prometheus/prometheus.yml"
	promtoolPackage = "prometheus"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// wantAlerts are the alerts the rules must define, with their expressions
// and hold times as specified.
var wantAlerts = map[string]struct{ expr, hold string }{
	"ShoalConsensusNoLeader":        {`shoal_consensus_bootstrapped == 1 and shoal_consensus_leader_known == 0`, "1m"},
	"ShoalNoWriterTerm":             {`shoal_pool_writer_term == 0`, "1m"},
	"ShoalRaftGroupSplit":           {`shoal_consensus_raft_groups > 1`, "30s"},
	"ShoalSwitchoverResumed":        {`increase(shoal_switchover_resumed_total[15m]) > 0`, ""},
	"ShoalFailover":                 {`increase(shoal_failovers_total[15m]) > 0`, ""},
	"ShoalFailoverLostTransactions": {`increase(shoal_failover_lost_transactions_total[1h]) > 0`, ""},
	"ShoalMemberFailed":             {`shoal_members{status="failed"} > 0`, "1m"},
	"ShoalNoReaders":                {`shoal_pool_nodes{role="reader"} < 1`, "30s"},
	"ShoalNoWriter":                 {`shoal_pool_nodes{role="writer"} < 1`, "30s"},
	"ShoalWriterConflict":           {`shoal_pool_writer_conflict == 1`, ""},
	"ShoalIsolated":                 {`shoal_pool_isolated == 1`, ""},
	"ShoalReplicaStale":             {`shoal_pool_out{reason="stale"} == 1`, "1m"},
	"ShoalHookFailures":             {`increase(shoal_hook_runs_total{result!="ok"}[10m]) > 0`, ""},
	"ShoalHookDropped":              {`increase(shoal_hook_dropped_total[10m]) > 0`, ""},
	"ShoalMySQLProbeDown":           {`shoal_mysql_up == 0`, "30s"},
	"ShoalSinkFailing":              {`shoal_sink_up == 0`, "2m"},
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	var rf ruleFile
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, alertsFile)))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var rules []rule
	for _, g := range rf.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// TestAlertRulesContent checks, without promtool, that every alert is there
// as specified, uses only metrics shoal exports, and carries a severity and
// annotations that name what fired.
func TestAlertRulesContent(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			t.Errorf("recording rule %q: alerts.yml should hold alerts only", r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		want, ok := wantAlerts[r.Alert]
		if !ok {
			t.Errorf("alert %s is not in the specified set; add it to wantAlerts", r.Alert)
		} else {
			if got := strings.Join(strings.Fields(r.Expr), " "); got != want.expr {
				t.Errorf("alert %s: expr %q, want %q", r.Alert, got, want.expr)
			}
			if r.For != want.hold {
				t.Errorf("alert %s: for %q, want %q", r.Alert, r.For, want.hold)
			}
		}
		if _, unknown := metricsIn(r.Expr); len(unknown) > 0 {
			t.Errorf("alert %s uses metrics shoal does not export: %q", r.Alert, unknown)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, key := range []string{"summary", "description"} {
			if !strings.Contains(r.Annotations[key], "$labels.") {
				t.Errorf("alert %s: annotation %s %q does not name the labels of what fired", r.Alert, key, r.Annotations[key])
			}
		}
	}
	for name := range wantAlerts {
		if !seen[name] {
			t.Errorf("alert %s missing from %s", name, alertsFile)
		}
	}
}

// TestAlertTestsCoverEveryAlert checks that alerts_test.yml has, for every
// alert, a case where it fires and one where it does not.
func TestAlertTestsCoverEveryAlert(t *testing.T) {
	var tf struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name      string `yaml:"name"`
			AlertTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, alertsTestFile)), &tf); err != nil {
		t.Fatalf("%s: %v", alertsTestFile, err)
	}
	if !slices.Contains(tf.RuleFiles, filepath.Base(alertsFile)) {
		t.Errorf("%s: rule_files %q do not include %s", alertsTestFile, tf.RuleFiles, filepath.Base(alertsFile))
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, at := range tc.AlertTest {
			if len(at.ExpAlerts) > 0 {
				firing[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, r := range loadRules(t) {
		if !firing[r.Alert] {
			t.Errorf("%s: no case where %s fires", alertsTestFile, r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no case where %s does not fire", alertsTestFile, r.Alert)
		}
	}
}

// TestPromtoolRules runs promtool check rules and the rule unit tests.
func TestPromtoolRules(t *testing.T) {
	promtool := requireTool(t, "promtool", promtoolPackage)
	dir := repoPath(t, ".")
	if out, err := run(t, dir, promtool, "check", "rules", alertsFile); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	if out, err := run(t, dir, promtool, "test", "rules", alertsTestFile); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", alertsTestFile, err, out)
	}
}

// TestPromtoolConfig checks the example scrape configuration (and the rule
// file it loads).
func TestPromtoolConfig(t *testing.T) {
	promtool := requireTool(t, "promtool", promtoolPackage)
	if out, err := run(t, repoPath(t, "."), promtool, "check", "config", prometheusFile); err != nil {
		t.Fatalf("promtool check config %s: %v\n%s", prometheusFile, err, out)
	}
}

// checkPromQL has promtool parse expressions, as recording rules of a
// temporary rule file; names label the expressions in errors.
func checkPromQL(t *testing.T, names, exprs []string) {
	t.Helper()
	promtool := requireTool(t, "promtool", promtoolPackage)
	type rec struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rec
	for i, e := range exprs {
		rules = append(rules, rec{Record: fmt.Sprintf("check:expr_%d", i), Expr: e})
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "check", "rules": rules}}}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "exprs.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, t.TempDir(), promtool, "check", "rules", path); err != nil {
		var list strings.Builder
		for i, n := range names {
			fmt.Fprintf(&list, "  expr_%d: %s\n", i, n)
		}
		t.Fatalf("promtool check rules: %v\n%s\nexpressions:\n%s", err, out, list.String())
	}
}

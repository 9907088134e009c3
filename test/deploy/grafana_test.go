package deploy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const dashboardFile = "deploy/grafana/shoal.json"

type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	SchemaVersion int     `json:"schemaVersion"`
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		Datasource *datasource `json:"datasource"`
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // collapsed rows
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// allPanels flattens rows.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// grafanaToPromQL replaces the dashboard's variables so that promtool can
// parse the expression.
var grafanaToPromQL = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$instance", ".*", "$cluster", ".*")

// TestGrafanaDashboard checks the dashboard's structure and that every
// query uses only metrics shoal exports; with promtool, that every query
// parses as PromQL.
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.SchemaVersion < 36 || d.UID == "" || d.Title == "" {
		t.Errorf("schemaVersion %d, uid %q, title %q: want schemaVersion >= 36 and a uid and title", d.SchemaVersion, d.UID, d.Title)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs %+v: want the one Prometheus input DS_PROMETHEUS", d.Inputs)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for name, typ := range map[string]string{"DS_PROMETHEUS": "datasource", "instance": "query", "cluster": "query"} {
		if vars[name] != typ {
			t.Errorf("template variable %s: type %q, want %q", name, vars[name], typ)
		}
	}

	used := map[string]bool{}
	ids := map[int]bool{}
	var names, exprs []string
	panels := allPanels(d.Panels)
	for _, p := range panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: duplicate id", where)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24-column grid", where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${DS_PROMETHEUS}" {
			t.Errorf("%s: datasource %+v, want uid ${DS_PROMETHEUS}", where, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", where)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s query %s: empty expr", where, tg.RefID)
				continue
			}
			if tg.Datasource != nil && tg.Datasource.UID != "${DS_PROMETHEUS}" {
				t.Errorf("%s query %s: datasource %+v, want uid ${DS_PROMETHEUS}", where, tg.RefID, tg.Datasource)
			}
			metrics, unknown := metricsIn(tg.Expr)
			if len(metrics) == 0 {
				t.Errorf("%s query %s: %q uses no shoal metric", where, tg.RefID, tg.Expr)
			}
			if len(unknown) > 0 {
				t.Errorf("%s query %s: metrics shoal does not export: %q", where, tg.RefID, unknown)
			}
			for _, m := range metrics {
				used[m] = true
			}
			if strings.Contains(tg.Expr, "shoal_") && !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("%s query %s: %q ignores the instance variable", where, tg.RefID, tg.Expr)
			}
			names = append(names, where+" "+tg.RefID)
			exprs = append(exprs, grafanaToPromQL.Replace(tg.Expr))
		}
	}
	checkOverlaps(t, panels)

	for _, m := range []string{
		"shoal_members", "shoal_pool_nodes", "shoal_pool_out", "shoal_pool_writer_conflict",
		"shoal_pool_isolated", "shoal_mysql_check_duration_seconds_bucket", "shoal_mysql_up",
		"shoal_mysql_replication_lag_seconds", "shoal_member_events_total", "shoal_hook_runs_total",
		"shoal_hook_queue_depth", "shoal_sink_up",
	} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}

	t.Run("promql", func(t *testing.T) { checkPromQL(t, names, exprs) })
}

// checkOverlaps reports panels that cover the same grid cells.
func checkOverlaps(t *testing.T, panels []panel) {
	t.Helper()
	for i, a := range panels {
		for _, b := range panels[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
				t.Errorf("panels %q %+v and %q %+v overlap", a.Title, ga, b.Title, gb)
			}
		}
	}
}

package pool

import "testing"

func TestHold(t *testing.T) {
	node := func(name string, r Reason) Node { return Node{Name: name, Addr: name + ":3306", Reason: r} }
	held := []Held{
		{Cluster: "c", Name: "db1", Writer: true, Detail: "held: x"},
		{Cluster: "c", Name: "db2", Reader: true, Detail: "held: x"},
		{Cluster: "c", Name: "db3", Reader: true, Detail: "held: x"},
	}
	cur := &Pool{Clusters: []Cluster{{
		Name: "c",
		Out: []Node{
			node("db1", ReasonAgentFailed), node("db2", ReasonAgentFailed),
			node("db3", ReasonCritical), node("db5", ReasonAgentFailed),
		},
		Readers: []Node{node("db4", "")},
	}}}
	got := Hold(cur, held)
	c := got.Cluster("c")
	if c.Writer() != "db1" {
		t.Errorf("writer %q, want db1 restored", c.Writer())
	}
	var readers []string
	for _, n := range c.Readers {
		readers = append(readers, n.Name)
		if n.Name == "db2" && (n.Reason != "" || n.Detail != "held: x") {
			t.Errorf("restored reader %+v: want no reason and the held detail", n)
		}
	}
	if want := "db2,db4"; join(readers) != want {
		t.Errorf("readers %s, want %s (db3 critical stays out)", join(readers), want)
	}
	var out []string
	for _, n := range c.Out {
		out = append(out, n.Name+"("+string(n.Reason)+")")
	}
	if want := "db3(critical),db5(agent-failed)"; join(out) != want {
		t.Errorf("out %s, want %s (db5 is not held)", join(out), want)
	}
	if cur.Cluster("c").Writer() != "" || len(cur.Cluster("c").Out) != 4 {
		t.Error("Hold modified its input")
	}

	// Never two writers: a new writer in cur keeps the failed old one out.
	cur2 := &Pool{Clusters: []Cluster{{Name: "c", Writers: []Node{node("db2", "")}, Out: []Node{node("db1", ReasonAgentFailed)}}}}
	if c := Hold(cur2, held).Cluster("c"); len(c.Writers) != 1 || c.Writer() != "db2" || len(c.Out) != 1 {
		t.Errorf("writers %+v out %+v, want only db2, db1 out", c.Writers, c.Out)
	}
	if Hold(nil, held) != nil || Hold(cur, nil).Cluster("c").Writer() != "" {
		t.Error("nil inputs")
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// Issue 26: a held writer that lost the writer term meanwhile is not put
// back, even when the cluster has no writer; the holder is.
func TestHoldKeepsOnlyTheTermHolderAsWriter(t *testing.T) {
	cur := &Pool{Clusters: []Cluster{{Name: "default",
		Out: []Node{{Name: "a", Addr: "a:3306", Reason: ReasonAgentFailed}, {Name: "b", Addr: "b:3306", Reason: ReasonNoTerm}}}}}
	held := []Held{{Cluster: "default", Name: "a", Writer: true}}
	cur.Clusters[0].Term = &Term{Cluster: "default", Number: 2, Writer: "b", Addr: "b:3306"}
	if got := Hold(cur, held); got.Cluster("default").Writer() != "" {
		t.Fatalf("term 2 is b's: held writer a put back: %s", summary(got))
	}
	cur.Clusters[0].Term = &Term{Cluster: "default", Number: 1, Writer: "a", Addr: "a:3306"}
	if got := Hold(cur, held); got.Cluster("default").Writer() != "a" {
		t.Fatalf("a holds term 1: not put back: %s", summary(got))
	}
}

// shoal status page. Reads the agent's open JSON endpoints (same origin, no
// token) about once a second and renders them.
//
// Every string from the API may come from another machine (node names,
// tags, reasons, errors): it is hostile. It is only ever put in the page as
// a text node (document.createTextNode). Element classes and data
// attributes are set from this file's own constants only. No string is ever
// parsed as markup or code (internal/ui's tests check the source for it).
'use strict';

(function () {
  const POLL_MS = 1000;
  const TIMEOUT_MS = 2500;
  const HISTORY_LIMIT = 50;
  const ENDPOINTS = {
    self: 'v1/agent/self',
    health: 'v1/health',
    pool: 'v1/pool',
    members: 'v1/members',
    history: 'v1/history?limit=' + HISTORY_LIMIT,
  };

  const state = {
    data: null, // the last complete answer set
    lastOK: null, // Date of the last complete answer set
    failingSince: null, // Date of the first failed poll since the last success
    error: '',
  };

  // ---- DOM helpers: text nodes only -------------------------------------

  // el builds an element; cls is one of this file's class names, kids are
  // nodes or strings (added as text nodes), arrays are flattened, null and
  // false skipped.
  function el(tag, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (let i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }

  function add(parent, kid) {
    if (kid === null || kid === undefined || kid === false) return;
    if (Array.isArray(kid)) {
      kid.forEach(function (k) { add(parent, k); });
    } else if (kid instanceof Node) {
      parent.appendChild(kid);
    } else {
      parent.appendChild(document.createTextNode(String(kid)));
    }
  }

  // TONES are the only status classes: a colour, always next to a text label.
  const TONES = { ok: 'tone-ok', info: 'tone-info', warn: 'tone-warn', bad: 'tone-bad', idle: 'tone-idle' };

  function chip(label, tone) {
    return el('span', 'chip ' + (TONES[tone] || TONES.idle), label);
  }

  function toneOf(value) {
    switch (value) {
      case 'alive': case 'passing': case 'ok': case 'reader': case 'connected': case 'off': case 'follower':
        return 'ok';
      case 'writer': case 'leader':
        return 'info';
      case 'leaving': case 'warning': case 'pending': case 'floor': case 'on': case 'candidate':
        return 'warn';
      case 'failed': case 'critical': case 'failing': case 'out': case 'isolated': case 'shutdown':
        return 'bad';
    }
    return 'idle';
  }

  function setKids(id, kids) {
    const node = document.getElementById(id);
    node.replaceChildren();
    add(node, kids);
  }

  function table(head, rows, cls) {
    const thead = el('thead', null, el('tr', null, head.map(function (h) { return el('th', null, h); })));
    const wrap = el('div', 'table-wrap', el('table', cls || null, thead, el('tbody', null, rows)));
    return wrap;
  }

  function td(cls) {
    const args = Array.prototype.slice.call(arguments, 1);
    return el.apply(null, ['td', cls].concat(args));
  }

  function muted(text) { return el('span', 'muted', text); }

  // ---- formatting -------------------------------------------------------

  function pad(n, w) { return String(n).padStart(w || 2, '0'); }

  function parseTime(s) {
    if (!s) return null;
    const d = new Date(s);
    return isNaN(d.getTime()) ? null : d;
  }

  function clock(d) {
    if (!d) return '—';
    return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  function clockMs(d) {
    if (!d) return '—';
    return clock(d) + '.' + pad(d.getMilliseconds(), 3);
  }

  function dayAndClock(d) {
    if (!d) return '—';
    const now = new Date();
    if (d.toDateString() === now.toDateString()) return clockMs(d);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + clockMs(d);
  }

  function span(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + (s % 60) + ' s';
    const h = Math.floor(m / 60);
    if (h < 48) return h + ' h ' + (m % 60) + ' min';
    return Math.floor(h / 24) + ' d ' + (h % 24) + ' h';
  }

  function ago(d) {
    if (!d) return '';
    return span(Date.now() - d.getTime()) + ' ago';
  }

  function hostPort(addr, port) {
    if (!addr) return '—';
    if (!port) return addr;
    return (addr.indexOf(':') >= 0 ? '[' + addr + ']' : addr) + ':' + port;
  }

  function rtt(sec) {
    if (typeof sec !== 'number' || !isFinite(sec)) return '—';
    const ms = sec * 1000;
    if (ms < 10) return ms.toFixed(2) + ' ms';
    if (ms < 100) return ms.toFixed(1) + ' ms';
    return Math.round(ms) + ' ms';
  }

  // lagText is a replica's lag as shoal pool shows it: "3 tx / 1.2s (gtid)"
  // (transactions only for gtid), "\u2265" before seconds that are a lower
  // bound, "0s (sbm)", "unknown (sbm)" when Seconds_Behind_Master is NULL.
  function lagText(l) {
    let sec = 'unknown';
    if (typeof l.seconds === 'number' && isFinite(l.seconds)) {
      const s = l.seconds;
      sec = s <= 0 ? '0s' : (l.source === 'gtid' ? s.toFixed(1) : s.toFixed(0)) + 's';
      if (l.at_least) sec = '\u2265' + sec;
    }
    if (typeof l.transactions === 'number') sec = l.transactions + ' tx / ' + sec;
    return sec + ' (' + String(l.source) + ')';
  }

  function yesNo(b, yes, no) { return b ? yes : no; }

  // ---- sections ---------------------------------------------------------

  function renderIdentity(d) {
    const info = d.self || {};
    const health = d.health || {};
    const tags = info.tags || {};
    const role = health.role || tags.role || '—';
    const items = [
      el('span', 'id-node', info.node || '?'),
      chip(role, 'idle'),
      field('cluster', tags.cluster || 'default'),
      field('version', info.version || '?'),
      field('gossip', info.addr || '—'),
      field('http', info.http_addr || location.host),
      field('profile', info.profile || '—'),
      field('up', info.started ? span(Date.now() - parseTime(info.started).getTime()) : '—'),
      chip(health.status === 'ok' ? 'healthy' : 'not healthy', health.status === 'ok' ? 'ok' : 'bad'),
      info.encrypted ? chip('encrypted', 'ok') : chip('gossip not encrypted', 'warn'),
    ];
    setKids('identity', items);
    document.title = 'shoal · ' + (info.node || 'status');
  }

  function field(name, value) {
    return el('span', 'field', el('span', 'field-name', name), ' ', el('span', 'field-value', value));
  }

  function renderConn() {
    const kids = [];
    if (state.failingSince) {
      kids.push(chip('disconnected', 'bad'), ' since ', clock(state.failingSince));
    } else if (state.lastOK) {
      kids.push(chip('live', 'ok'), ' updated ', clock(state.lastOK));
    } else {
      kids.push(chip('connecting', 'idle'));
    }
    setKids('conn', kids);
  }

  function banner(tone, title, text) {
    return el('div', 'banner ' + (TONES[tone] || TONES.idle), el('strong', null, title), ' ', text || '');
  }

  function renderBanners(d) {
    const out = [];
    if (state.failingSince) {
      out.push(el('div', 'banner tone-bad', el('strong', null, 'Disconnected since ' + clock(state.failingSince) + '.'),
        ' The agent stopped answering (' + (state.error || 'no answer') + '). ',
        state.lastOK ? 'Everything below is the last data received at ' + clock(state.lastOK) + ', ' + ago(state.lastOK) + ': it is not live.' :
          'No data has been received yet.'));
    }
    if (!d) {
      setKids('banners', out);
      return;
    }
    const pool = d.pool || {};
    if (pool.isolated) {
      out.push(banner('bad', 'Isolated:', pool.isolation || 'this agent cannot reach the fleet; it holds what it routed.'));
    } else if (pool.isolation) {
      out.push(banner('warn', 'Isolation expired:', pool.isolation));
    } else if (pool.held > 0) {
      out.push(banner('warn', 'Held:', pool.held + ' node(s) kept in their role until their failure is verified (see the detail column).'));
    }
    (pool.clusters || []).forEach(function (c) {
      if (c.conflict && c.conflict.length) {
        out.push(banner('bad', 'Writer conflict in cluster ' + c.name + ':', c.conflict.join(', ') + ' are writable; at most one is kept as writer.'));
      }
      if (!c.writers || c.writers.length === 0) {
        out.push(banner('bad', 'No writer in cluster ' + c.name + '.', ''));
      }
    });
    (pool.sinks || []).forEach(function (s) {
      if (s.frozen) {
        out.push(banner('warn', 'Frozen:', 'sink ' + s.name + ' withholds removals (this agent looks isolated).'));
      }
      if (s.state === 'failing') {
        out.push(banner('bad', 'Sink ' + s.name + ' failing:', s.last_error || ''));
      }
    });
    const cons = (d.self || {}).consensus;
    if (cons && (cons.groups || []).length > 1) {
      out.push(banner('bad', 'Raft groups split:', 'voters of ' + cons.groups.length + ' raft groups are in the gossip (' +
        cons.groups.map(function (g) { return g.id + ': ' + (g.voters || []).join(', '); }).join('; ') +
        '); no writes are routed where a writer term is required until one group is left.'));
    }
    if (cons && cons.voter && cons.bootstrapped && !hasLeader(cons)) {
      out.push(banner('bad', 'No raft leader:', 'this voter knows no leader; no writer term can be granted until a quorum of the voters is back.'));
    }
    const h = d.health || {};
    if (h.status && h.status !== 'ok') {
      out.push(banner('warn', 'This agent is not healthy:', h.status));
    }
    setKids('banners', out);
  }

  function placeChip(place, reason) {
    if (place === 'reader' && reason === 'floor') return chip('reader (floor)', 'warn');
    if (place === 'reader' && reason === 'fallback') return chip('reader (fallback)', 'warn');
    return chip(place, toneOf(place));
  }

  function renderPool(d) {
    const pool = d.pool || {};
    const clusters = pool.clusters || [];
    if (clusters.length === 0) {
      setKids('pool', el('p', 'empty', 'No database members in the pool.'));
      return;
    }
    const cards = clusters.map(function (c) {
      const rows = [];
      const row = function (place, n) {
        const tr = el('tr', 'place-' + place,
          td('c-place', placeChip(place, n.reason)),
          td('c-node node', n.name),
          td('c-addr mono', n.addr || '—'),
          td('c-lag', n.lag ? lagText(n.lag) : muted('—')),
          td('c-reason', n.reason ? el('span', 'reason', n.reason) : muted('—')),
          td('c-detail', n.detail || '', n.until ? ' (until ' + clock(parseTime(n.until)) + ')' : ''));
        tr.setAttribute('data-place', place);
        rows.push(tr);
      };
      (c.writers || []).forEach(function (n) { row('writer', n); });
      (c.readers || []).forEach(function (n) { row('reader', n); });
      (c.out || []).forEach(function (n) { row('out', n); });
      if (rows.length === 0) rows.push(el('tr', null, el('td', 'empty', 'no nodes')));
      const nw = (c.writers || []).length, nr = (c.readers || []).length, no = (c.out || []).length;
      const head = el('div', 'card-head',
        el('h3', null, el('span', 'muted', 'cluster '), c.name),
        el('span', 'counts',
          chip(nw + (nw === 1 ? ' writer' : ' writers'), nw === 1 ? 'info' : 'bad'), ' ',
          chip(nr + (nr === 1 ? ' reader' : ' readers'), nr > 0 ? 'ok' : 'warn'), ' ',
          chip(no + ' out', no > 0 ? 'bad' : 'idle')));
      // The writer term the cluster's writer rule follows (docs/pool.md);
      // absent when the cluster requires none.
      const term = c.term ? (c.term.term ? 'term ' + c.term.term + ': ' + c.term.writer + (c.term.granted ? ', granted ' + c.term.granted : '')
        : 'term: none known (no writer until the voters grant one)') : null;
      const card = el('div', 'card', head,
        term ? el('p', 'muted small', term) : null,
        c.conflict && c.conflict.length ? el('p', 'inline-banner tone-bad', 'conflict: ' + c.conflict.join(', ') + ' writable') : null,
        table(['place', 'node', 'address', 'lag', 'reason', 'detail'], rows, 'pool-table'));
      card.setAttribute('data-cluster-card', '');
      return card;
    });
    const updated = parseTime(pool.updated_at);
    setKids('pool', [cards, el('p', 'muted small', 'pool computed ' + (updated ? clockMs(updated) + ' (' + ago(updated) + ')' : '—'))]);
  }

  // NOT_READ are the probe's reasons (internal/probe/state.go) for a check
  // that did not read the server's facts: the server was not reached or a
  // statement failed. The health tag then carries the facts of the last
  // check that read them, which may be long gone.
  const NOT_READ = ['starting', 'refused', 'conn_lost', 'shutdown', 'timeout', 'auth', 'too_many', 'connect', 'query', 'panic'];

  function facts(h) {
    if (!h) return muted('—');
    if (h.error) return el('span', 'error-text', h.error);
    // A probe that never read its server publishes no facts (zeros).
    if (h.state === 'critical' && !h.server_id) return muted('no facts: the probe cannot reach its server');
    const text = factParts(h).join(' · ');
    if (h.state !== 'passing' && NOT_READ.indexOf(h.reason) >= 0) {
      return el('span', 'facts facts-old', 'last known, not current: ' + text);
    }
    return el('span', 'facts', text);
  }

  // SHOWN_FACTS are the health fields this page renders in its own way;
  // otherFacts lists every other one the API serves (the facts of the
  // schema, internal/tags), by its name, when it is set: a fact added to the
  // schema shows here with no change to the page.
  const SHOWN_FACTS = ['state', 'reason', 'error', 'read_only', 'super_read_only', 'replica', 'io_running', 'sql_running',
    'lag_seconds', 'galera', 'galera_synced', 'server_id', 'port'];
  // LOCAL_FIELDS are the probe's own fields in /v1/health's mysql.
  const LOCAL_FIELDS = ['message', 'since', 'target', 'last_check', 'last_duration', 'checks', 'connects', 'reachable',
    'version', 'last_io_error', 'last_sql_error', 'published_tag'];

  function otherFacts(h, skip) {
    return Object.keys(h).filter(function (k) {
      const v = h[k];
      return SHOWN_FACTS.indexOf(k) < 0 && skip.indexOf(k) < 0 && v !== false && v !== 0 && v !== '' && v !== null && typeof v !== 'object';
    }).map(function (k) { return [k.replace(/_/g, ' '), String(h[k])]; });
  }

  function factParts(h) {
    const parts = [];
    parts.push(h.read_only ? (h.super_read_only ? 'super_read_only' : 'read_only') : 'writable');
    if (h.replica) {
      parts.push('io ' + yesNo(h.io_running, 'on', 'OFF'));
      parts.push('sql ' + yesNo(h.sql_running, 'on', 'OFF'));
      parts.push('lag ' + (typeof h.lag_seconds === 'number' ? h.lag_seconds + ' s' : 'unknown'));
    } else if (!h.galera) {
      parts.push('no replication');
    }
    if (h.galera) parts.push('galera ' + yesNo(h.galera_synced, 'synced', 'NOT synced'));
    parts.push('server_id ' + h.server_id);
    otherFacts(h, []).forEach(function (f) { parts.push(f[0] + ' ' + f[1]); });
    return parts;
  }

  function renderMembers(d) {
    const self = (d.self || {}).node;
    const ms = ((d.members || {}).members || []).slice();
    if (ms.length === 0) {
      setKids('members', el('p', 'empty', 'No members.'));
      return;
    }
    const rows = ms.map(function (m) {
      const tags = m.tags || {};
      const h = m.health;
      const nameCell = td('c-node', el('span', 'node', m.name),
        m.name === self ? el('span', 'muted small', ' (this agent)') : null,
        m.invalid ? el('div', 'small', chip('invalid: ' + m.invalid.reason, 'bad'), ' ', el('span', 'muted', m.invalid.detail)) : null);
      const healthCell = h ? (h.error ? chip('bad tag', 'bad') : [chip(h.state, toneOf(h.state)), h.reason ? el('span', 'reason', ' ' + h.reason) : null]) : muted('—');
      const tr = el('tr', null,
        nameCell,
        td('c-status', chip(m.status, toneOf(m.status))),
        td('c-role', tags.role || '—'),
        td('c-cluster', tags.role === 'db' ? (tags.cluster || 'default') : (tags.cluster || '—')),
        td('c-addr mono', hostPort(m.addr, m.port)),
        td('c-rtt num', m.name === self ? muted('self') : rtt(m.rtt_seconds)),
        td('c-health', healthCell),
        td('c-facts', h ? facts(h) : null, userTags(tags, !h)));
      tr.setAttribute('data-status', toneOf(m.status));
      return tr;
    });
    const counts = {};
    ms.forEach(function (m) { counts[m.status] = (counts[m.status] || 0) + 1; });
    const summary = el('p', 'muted small', Object.keys(counts).sort().map(function (k) { return counts[k] + ' ' + k; }).join(' · '));
    setKids('members', [table(['node', 'status', 'role', 'cluster', 'gossip address', 'RTT', 'health', 'probe facts / tags'], rows, 'members-table'), summary]);
  }

  // userTags shows a member's own tags (not shoal's reserved ones: role,
  // cluster, maint, the health tag sh, the voter tag rv), or a
  // dash when it has none and nothing else fills the cell.
  function userTags(tags, dash) {
    const keys = Object.keys(tags).filter(function (k) { return ['role', 'cluster', 'maint', 'sh', 'rv'].indexOf(k) < 0; }).sort();
    if (keys.length === 0) return dash ? muted('—') : null;
    return el('div', 'tags', keys.map(function (k) { return k + '=' + tags[k]; }).join(' '));
  }

  function renderLocal(d) {
    const mysql = (d.health || {}).mysql;
    const section = document.getElementById('local-section');
    section.hidden = !mysql;
    if (!mysql) return;
    const lag = typeof mysql.lag_seconds === 'number' ? mysql.lag_seconds + ' s' : (mysql.replica ? 'unknown' : '—');
    // The facts are the latest the probe read; the latest check may not
    // have reached the server: then they are dimmed and labelled.
    const old = mysql.reachable === false;
    const fact = function (v) { return old ? el('span', 'facts-old', v) : v; };
    const rows = [
      ['state', [chip(mysql.state, toneOf(mysql.state)), mysql.reason ? ' ' + mysql.reason : '', mysql.since ? el('span', 'muted', ' since ' + clock(parseTime(mysql.since))) : null]],
      ['message', mysql.message || '—'],
      ['target', el('span', 'mono', mysql.target || '—')],
      ['server facts', old ? el('span', 'note', 'last known, not current: the latest check did not reach the server') : 'from the latest check'],
      ['server version', fact(mysql.version || '—')],
      ['server_id', fact(String(mysql.server_id))],
      ['read_only', fact(yesNo(mysql.read_only, 'ON', 'OFF'))],
      ['replication', fact(mysql.replica ? 'io ' + yesNo(mysql.io_running, 'running', 'STOPPED') + ' · sql ' + yesNo(mysql.sql_running, 'running', 'STOPPED') : 'not a replica')],
      ['lag', fact(lag)],
    ].concat(otherFacts(mysql, LOCAL_FIELDS).map(function (f) { return [f[0], fact(f[1])]; }), [
      ['last io / sql error', [mysql.last_io_error || '', mysql.last_sql_error ? ' ' + mysql.last_sql_error : ''].join('') || '—'],
      ['last check', (mysql.last_check ? clockMs(parseTime(mysql.last_check)) : '—') + (mysql.last_duration ? ' in ' + mysql.last_duration : '') + ' · ' + mysql.checks + ' checks, ' + mysql.connects + ' connects'],
      ['published tag', el('span', 'mono', mysql.published_tag || '—')],
      ['last fencing', fenceCell(mysql.fence)],
    ]);
    setKids('local', el('dl', 'kv', rows.map(function (r) { return [el('dt', null, r[0]), el('dd', null, r[1])]; })));
  }

  // fenceCell is this agent's last fencing of its own server (read-only,
  // clients killed: docs/consensus.md, "Fencing"), or a dash.
  function fenceCell(f) {
    if (!f) return muted('never');
    const when = el('span', 'muted', ' at ' + clock(parseTime(f.time)));
    if (f.result !== 'ok') {
      return [chip('failed', 'bad'), when, ' ' + f.why + ': ' + (f.error || ''),
        f.retry_at ? el('span', 'muted', ' (retry at ' + clock(parseTime(f.retry_at)) + ')') : null];
    }
    return [chip('fenced', 'warn'), when, ' ' + f.why + ' (' + f.connections_killed + ' connections killed)'];
  }

  // appliedCell is a sink's applied generation against gen, the generation
  // of the pool shown: "applied / gen", and a behind chip while the sink
  // has not applied that pool (a failing or frozen sink stays behind). Its
  // kind, one of this file's constants, is the row's data-sink-applied.
  function appliedCell(s, gen) {
    const a = Number(s.applied_generation) || 0;
    const g = Number(gen) || 0;
    const shown = a > 0 ? String(a) : '—';
    if (g === 0) return { kind: a > 0 ? 'current' : 'none', cell: td('num', shown) };
    if (a >= g) return { kind: 'current', cell: td('num', shown + ' / ' + g) };
    return { kind: 'behind', cell: td('num', shown + ' / ' + g, ' ', chip('behind', 'warn')) };
  }

  function renderSinks(d) {
    const pool = d.pool || {};
    const sinks = pool.sinks || [];
    if (sinks.length === 0) {
      setKids('sinks', el('p', 'empty', 'This agent drives no sink (db hosts usually drive none).'));
      return;
    }
    const rows = sinks.map(function (s) {
      const applied = appliedCell(s, pool.generation);
      const tr = el('tr', null,
        td('c-node', s.name),
        td('c-status', chip(s.state, toneOf(s.state)), s.frozen ? [' ', chip('frozen', 'warn')] : null),
        td('c-target mono', s.target),
        td('c-time', s.last_success ? clock(parseTime(s.last_success)) : '—'),
        applied.cell,
        td('num', String(s.failures)),
        td('c-detail', s.last_error ? [el('span', 'error-text', s.last_error), s.last_error_at ? el('span', 'muted', ' at ' + clock(parseTime(s.last_error_at))) : null] : muted('—'),
          (s.notes || []).map(function (n) { return el('div', 'note', n); })));
      tr.setAttribute('data-sink-state', toneOf(s.state));
      tr.setAttribute('data-sink-applied', applied.kind);
      return tr;
    });
    setKids('sinks', table(['sink', 'state', 'target', 'last success', 'applied / pool', 'failures', 'last error / notes'], rows, 'sinks-table'));
  }

  function hasLeader(c) { return !!(c.leader || c.leader_addr); }

  // renderConsensus shows the consensus layer (GET /v1/agent/self's
  // consensus, absent without a consensus keyring or consensus.term_key):
  // this voter's raft state, its voters (the leader marks the failing
  // ones) and the writer terms. A router (an app agent with the term key
  // alone) is no voter: the view does not say whether it also holds a
  // keyring, only which term keys it verifies with, so that is what the
  // page says.
  function renderConsensus(d) {
    const c = (d.self || {}).consensus;
    const section = document.getElementById('consensus-section');
    section.hidden = !c;
    if (!c) return;
    const kids = [];
    if (!c.voter) {
      kids.push(el('p', 'muted', notVoterText((c.term_keys || []).length)));
    } else {
      kids.push(consensusState(c), votersTable(c));
    }
    kids.push(termsTable(c.terms || [], c.voter));
    setKids('consensus', kids);
  }

  // notVoterText says what an agent that is not a raft voter does with
  // writer terms: it grants none, and verifies them with n term keys.
  function notVoterText(n) {
    if (n === 0) {
      return 'Not a raft voter, and no term key: this agent cannot verify writer terms, so it routes no writes to a cluster that requires one.';
    }
    return 'Not a raft voter: this agent grants no writer terms; it verifies them with ' +
      (n === 1 ? 'its term key' : 'its ' + n + ' term keys') + ' (consensus.term_key or a consensus keyring).';
  }

  function consensusState(c) {
    let leader;
    if (c.state === 'leader') {
      leader = 'this agent';
    } else if (hasLeader(c)) {
      leader = [el('span', 'node', c.leader || '?'), ' ', el('span', 'mono muted', c.leader_addr || '')];
    } else {
      leader = chip('none known', 'bad');
    }
    const contact = parseTime(c.last_contact);
    const refused = c.refused || {};
    const rows = [
      ['state', [chip(c.state || '—', toneOf(c.state)), ' ', el('span', 'node', c.id), ' ', el('span', 'mono muted', c.addr)]],
      ['leader', [leader, contact ? el('span', 'muted', ' · last contact ' + clock(contact) + ' (' + ago(contact) + ')') : null]],
      ['bootstrap', c.bootstrapped ? 'bootstrapped (bootstrap_expect ' + c.bootstrap_expect + ')' : chip('waiting for ' + c.bootstrap_expect + ' voters', 'warn')],
      ['raft group', c.group || muted('none known yet')],
      ['raft', 'term ' + c.raft_term + ' · last index ' + c.last_index + ' · applied ' + c.applied_index],
      ['refused', Object.keys(refused).sort().map(function (k) { return k + ' ' + refused[k]; }).join(' · ') || '—'],
    ];
    return el('dl', 'kv', rows.map(function (r) { return [el('dt', null, r[0]), el('dd', null, r[1])]; }));
  }

  function votersTable(c) {
    const voters = c.voters || [];
    if (voters.length === 0) return el('p', 'empty', 'No voters in the raft configuration yet.');
    const leads = c.state === 'leader';
    const rows = voters.map(function (v) {
      let status = muted('—'); // only the leader knows whose heartbeats fail
      if (v.failing) {
        status = [chip('failing', 'bad'), el('span', 'muted', ' since ' + dayAndClock(parseTime(v.last_contact)))];
      } else if (leads) {
        status = chip('ok', 'ok');
      }
      const tr = el('tr', null,
        td('c-node', el('span', 'node', v.id), v.id === c.id ? el('span', 'muted small', ' (this agent)') : null),
        td('c-addr mono', v.addr || '—'),
        td('c-status', v.leader ? chip('leader', 'info') : muted('—')),
        td('c-status', status));
      tr.setAttribute('data-voter', v.failing ? 'failing' : 'ok');
      return tr;
    });
    return table(['voter', 'raft address', 'leader', 'heartbeats'], rows, 'voters-table');
  }

  function termsTable(terms, voter) {
    if (terms.length === 0) return el('p', 'empty', voter ? 'No writer terms granted yet.' : 'No writer terms known.');
    const rows = terms.map(function (t) {
      return el('tr', null,
        td('c-cluster', t.cluster),
        td('num', String(t.term)),
        td('c-node', el('span', 'node', t.writer || '—')),
        td('c-addr mono', t.addr || '—'),
        td('c-time', dayAndClock(parseTime(t.granted))),
        td('c-detail', t.why || '—'));
    });
    return table(['cluster', 'term', 'writer', 'address', 'granted', 'why'], rows, 'terms-table');
  }

  function renderHistory(d) {
    const h = d.history || {};
    const entries = (h.entries || []).slice().reverse();
    if (entries.length === 0) {
      setKids('history', el('p', 'empty', 'No transitions recorded yet.'));
      return;
    }
    const items = entries.map(function (e) {
      const t = parseTime(e.time);
      // A node's change names cluster / node; a cluster's (conflict) the
      // cluster; isolation is this agent's own state.
      let where;
      if (e.node) {
        where = [e.cluster ? el('span', 'muted', e.cluster + ' / ') : null, el('span', 'node', e.node)];
      } else if (e.cluster) {
        where = [el('span', 'muted', 'cluster '), el('span', 'node', e.cluster)];
      } else {
        where = el('span', 'muted', 'this agent');
      }
      const li = el('li', 'event',
        el('span', 'ev-time mono', dayAndClock(t)),
        el('span', 'ev-kind', chip(e.kind, 'idle')),
        el('span', 'ev-node', where),
        el('span', 'ev-move', chip(e.from, toneOf(e.from)), el('span', 'arrow', ' → '), chip(e.to, toneOf(e.to))),
        el('span', 'ev-why', e.reason ? el('span', 'reason', e.reason) : null, e.detail ? el('span', 'muted', (e.reason ? ' · ' : '') + e.detail) : null));
      return li;
    });
    const note = el('p', 'muted small', 'last ' + entries.length + ' of ' + h.total + ' transitions since the agent started');
    setKids('history', [el('ol', 'timeline', items), note]);
  }

  function render() {
    const d = state.data;
    document.body.classList.toggle('stale', !!state.failingSince);
    renderConn();
    renderBanners(d);
    if (!d) return;
    renderIdentity(d);
    renderPool(d);
    renderMembers(d);
    renderLocal(d);
    renderConsensus(d);
    renderSinks(d);
    renderHistory(d);
  }

  // ---- polling ----------------------------------------------------------

  // getJSON fetches one endpoint. /v1/health answers 503 with its normal
  // body when the agent is not healthy: any JSON body that is not an error
  // counts.
  function getJSON(path) {
    const ctl = new AbortController();
    const timer = setTimeout(function () { ctl.abort(); }, TIMEOUT_MS);
    return fetch(path, { cache: 'no-store', credentials: 'omit', signal: ctl.signal, headers: { Accept: 'application/json' } })
      .then(function (resp) {
        return resp.json().then(function (body) {
          if (!resp.ok && !(path === ENDPOINTS.health && resp.status === 503)) {
            throw new Error(path + ': HTTP ' + resp.status + (body && body.error ? ' ' + body.error : ''));
          }
          return body;
        });
      })
      .catch(function (err) {
        throw new Error(err && err.name === 'AbortError' ? path + ': no answer within ' + TIMEOUT_MS / 1000 + ' s' : String(err && err.message || err));
      })
      .finally(function () { clearTimeout(timer); });
  }

  function poll() {
    const keys = Object.keys(ENDPOINTS);
    return Promise.all(keys.map(function (k) { return getJSON(ENDPOINTS[k]); }))
      .then(function (bodies) {
        const d = {};
        keys.forEach(function (k, i) { d[k] = bodies[i]; });
        state.data = d;
        state.lastOK = new Date();
        state.failingSince = null;
        state.error = '';
      })
      .catch(function (err) {
        if (!state.failingSince) state.failingSince = new Date();
        state.error = String(err && err.message || err);
      })
      .then(function () {
        try {
          render();
        } catch (err) {
          // A render bug must not stop the polling; say so on the page.
          setKids('banners', banner('bad', 'Page error:', String(err && err.message || err)));
        }
      });
  }

  function loop() {
    const start = Date.now();
    poll().then(function () {
      setTimeout(loop, Math.max(100, POLL_MS - (Date.now() - start)));
    });
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', loop);
  } else {
    loop();
  }
})();

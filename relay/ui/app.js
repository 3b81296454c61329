// The relay's status page. It polls the admin API with the token kept in session storage and
// redraws its tables; request and token rates come from successive reads of /metrics.
// Everything the relay sends is put into the page as text, never as markup.
'use strict';

(() => {
  const TOKEN_KEY = 'modelrelay.adminToken';
  const POLL_MS = 2000;
  const HISTORY_MS = 5 * 60 * 1000; // what the sparkline and the totals cover
  const RATE_WINDOW_MS = 10 * 1000; // what the current rates average over
  // Reading a key's usage makes the relay write its pending usage to the key store first, so
  // usage is read every few polls only, and for a bounded number of keys.
  const USAGE_EVERY_POLLS = 10;
  const USAGE_MAX_KEYS = 50;

  const $ = (id) => document.getElementById(id);

  // Refused is a 403 from the admin API: no token configured, or a wrong one.
  class Refused extends Error {}

  let session = 0; // bumped on every sign-in and sign-out; a poll of an older one stops
  let timer = 0;
  let polls = 0;
  let samples = []; // {t, requests, errors, input, output}: counter totals read from /metrics
  let usage = new Map(); // key id -> {requests, input, output}

  const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

  async function get(path, text) {
    const res = await fetch(path, {
      headers: { Authorization: 'Bearer ' + token(), Accept: text ? 'text/plain' : 'application/json' },
      cache: 'no-store',
    });
    if (res.status === 403) throw new Refused(await errorOf(res));
    if (!res.ok) throw new Error(`${res.status} ${await errorOf(res)}`);
    return text ? res.text() : res.json();
  }

  async function errorOf(res) {
    const body = await res.text();
    try {
      return JSON.parse(body).error || body;
    } catch {
      return body || res.statusText;
    }
  }

  // el builds an element; attributes are set as attributes, children appended as text or nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  const cell = (value, cls) => el('td', cls ? { class: cls } : {}, value);
  const num = (value) => cell(value, 'num');
  const badge = (text, kind) => el('span', { class: 'badge ' + kind }, text);

  function fill(tbody, rows, empty) {
    if (rows.length > 0) {
      tbody.replaceChildren(...rows);
      return;
    }
    const columns = tbody.closest('table').tHead.rows[0].cells.length;
    tbody.replaceChildren(el('tr', {}, el('td', { colspan: columns, class: 'empty' }, empty)));
  }

  function note(id, result) {
    $(id).textContent = result.status === 'rejected' ? `Could not read this: ${result.reason.message}` : '';
  }

  function ms(v) {
    return v < 1000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`;
  }

  function duration(secs) {
    secs = Math.floor(secs);
    const parts = [[86400, 'd'], [3600, 'h'], [60, 'm']].flatMap(([unit, name]) => {
      const n = Math.floor(secs / unit);
      secs -= n * unit;
      return n > 0 ? [n + name] : [];
    });
    return [...parts, secs + 's'].slice(0, 2).join(' ');
  }

  const count = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;

  function models(list) {
    if (!list || list.length === 0) return '—';
    const shown = list.slice(0, 4).join(', ');
    return list.length > 4 ? `${shown} and ${list.length - 4} more` : shown;
  }

  // --- rates from /metrics ---------------------------------------------------------------

  function label(labels, key) {
    for (const m of labels.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      if (m[1] === key) return m[2];
    }
    return '';
  }

  // metricTotals sums the counters the rates are made of from Prometheus' text format.
  function metricTotals(text) {
    const t = { requests: 0, errors: 0, input: 0, output: 0 };
    for (const line of text.split('\n')) {
      const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const [, name, labels = '', raw] = m;
      const value = Number(raw);
      if (!Number.isFinite(value)) continue;
      if (name === 'modelrelay_requests_total') {
        t.requests += value;
        if (label(labels, 'status').startsWith('5')) t.errors += value;
      } else if (name === 'gen_ai_client_token_usage_sum') {
        const type = label(labels, 'gen_ai_token_type');
        if (type === 'input' || type === 'output') t[type] += value;
      }
    }
    return t;
  }

  function addSample(totals) {
    const now = Date.now();
    const last = samples[samples.length - 1];
    if (last && ['requests', 'input', 'output'].some((k) => totals[k] < last[k])) samples = []; // the relay restarted
    samples.push({ t: now, ...totals });
    while (samples.length > 2 && samples[1].t <= now - HISTORY_MS) samples.shift();
  }

  // rate is the per-second increase of field over the last window, or null before two reads.
  function rate(field, windowMs) {
    if (samples.length < 2) return null;
    const last = samples[samples.length - 1];
    let first = samples.find((s) => s.t >= last.t - windowMs);
    if (first === last) first = samples[samples.length - 2];
    return (last[field] - first[field]) / ((last.t - first.t) / 1000);
  }

  const perSecond = (v) => (v === null ? '…' : `${v < 10 ? v.toFixed(2) : v.toFixed(0)}/s`);

  function renderRates() {
    const since = samples.length > 1 ? duration((samples[samples.length - 1].t - samples[0].t) / 1000) : '';
    const last = samples[samples.length - 1];
    const first = samples[0];
    const figures = [
      ['request-rate', 'Requests', perSecond(rate('requests', RATE_WINDOW_MS))],
      ['error-rate', 'Server errors (5xx)', perSecond(rate('errors', RATE_WINDOW_MS))],
      ['input-rate', 'Input tokens', perSecond(rate('input', RATE_WINDOW_MS))],
      ['output-rate', 'Output tokens', perSecond(rate('output', RATE_WINDOW_MS))],
      ['requests', `Requests, last ${since || '…'}`, since ? last.requests - first.requests : '…'],
      ['tokens', `Tokens, last ${since || '…'}`, since ? last.input + last.output - first.input - first.output : '…'],
    ];
    $('rates').replaceChildren(...figures.map(([id, name, value]) =>
      el('div', { 'data-figure': id }, el('dt', {}, name), el('dd', {}, value))));

    const points = [];
    let peak = 0;
    for (let i = 1; i < samples.length; i++) {
      const v = (samples[i].requests - samples[i - 1].requests) / ((samples[i].t - samples[i - 1].t) / 1000);
      points.push([samples[i].t, v]);
      peak = Math.max(peak, v);
    }
    // The line spans what has been read so far (up to HISTORY_MS), so it shows from the start.
    const end = last ? last.t : 0;
    const span = Math.max(end - (points.length > 0 ? points[0][0] : end), POLL_MS);
    const scale = peak > 0 ? peak : 1;
    $('sparkline').firstElementChild.setAttribute('points', points
      .map(([t, v]) => `${(300 * (1 - (end - t) / span)).toFixed(1)},${(46 - 44 * (v / scale)).toFixed(1)}`)
      .join(' '));
    $('sparkline').setAttribute('aria-label',
      `Requests per second over the last ${since || 'moments'}: peak ${perSecond(peak)}, now ${perSecond(rate('requests', RATE_WINDOW_MS))}`);
  }

  // --- tables ----------------------------------------------------------------------------

  function healthBadge(t, w) {
    if (w && w.is_draining) return badge('draining', 'warn');
    if (t.healthy) return badge('healthy', 'ok');
    return badge(w && w.suspect ? 'suspect' : 'unhealthy', 'bad');
  }

  function renderPools(stats, workerById) {
    const pools = stats.pools || {};
    const names = Object.keys(pools).sort();
    fill($('pools'), names.map((name) => {
      const p = pools[name];
      const healthy = p.targets.filter((t) => t.healthy).length;
      const inFlight = p.targets.reduce((n, t) => n + t.in_flight, 0);
      return el('tr', { 'data-pool': name }, el('th', { scope: 'row' }, name), cell(`${healthy} of ${p.targets.length}`),
        num(inFlight), num(p.queued), num(ms(p.estimated_wait_ms)), num(ms(p.mean_service_ms)));
    }), 'No pools.');

    const rows = names.flatMap((name) => pools[name].targets.map((t) => {
      const w = workerById.get(t.id);
      return el('tr', { 'data-target': t.id }, cell(name), el('th', { scope: 'row' }, t.id), cell(t.kind),
        el('td', {}, healthBadge(t, w)), cell(t.breaker || '—'),
        num(w ? `${w.reported_load} / ${w.max_concurrent}` : '—'), num(t.in_flight));
    }));
    fill($('targets'), rows, 'No targets: no relay worker is connected and no backend is configured.');
  }

  function renderWorkers(list) {
    fill($('workers'), list.map((w) => el('tr', { 'data-worker': w.worker_id },
      el('th', { scope: 'row' }, w.worker_id), cell(w.worker_name || '—'), cell(w.provider), cell(models(w.models)),
      num(`${w.reported_load} / ${w.max_concurrent}`), num(w.in_flight_count),
      el('td', {}, w.is_draining ? badge('draining', 'warn') : w.suspect ? badge('suspect', 'bad') : badge('ready', 'ok')))),
    'No relay workers connected.');
  }

  function renderCircuits(list) {
    fill($('circuits'), list.map((c) => el('tr', { 'data-circuit': c.id },
      el('th', { scope: 'row' }, c.id), cell(c.subdomain), cell(models(c.models)), cell(c.open_to_public ? 'yes' : 'no'),
      el('td', {}, (c.routes || []).length === 0 ? 'no routes' : el('ul', { class: 'routes' }, ...c.routes.map((r) =>
        el('li', {}, `${r.id} `, healthBadge(r, null), ` · ${r.in_flight} in flight`, r.breaker ? ` · breaker ${r.breaker}` : '')))))),
    'No circuits (they come from the coordinator in AppProxy mode).');
  }

  function keyState(k) {
    if (k.revoked) return badge('revoked', 'bad');
    if (k.expires_at && Date.parse(k.expires_at) <= Date.now()) return badge('expired', 'warn');
    return badge('active', 'ok');
  }

  function limits(k) {
    const parts = [];
    if (k.rate_limit_rpm !== null) parts.push(`${k.rate_limit_rpm} req/min`);
    if (k.token_limit_tpm !== null) parts.push(`${k.token_limit_tpm} tok/min`);
    if (k.allowed_models && k.allowed_models.length > 0) parts.push(`models ${models(k.allowed_models)}`);
    if (k.priority !== null) parts.push(`priority ${k.priority}`);
    if (k.max_priority !== null) parts.push(`max priority ${k.max_priority}`);
    if (k.cache) parts.push(`cache ${k.cache}`);
    if (k.expires_at !== null) parts.push(`expires ${new Date(k.expires_at).toLocaleString()}`);
    return parts.length > 0 ? parts.join('; ') : 'none';
  }

  function renderKeys(list) {
    const beyond = list.filter((k) => !k.revoked).length - USAGE_MAX_KEYS;
    $('keys-usage-note').textContent = beyond > 0 ? `Usage is shown for the first ${USAGE_MAX_KEYS} active keys only.` : '';
    fill($('keys'), list.map((k) => {
      const u = usage.get(k.id);
      return el('tr', { 'data-key': k.id }, el('th', { scope: 'row' }, k.name || '—'), cell(k.prefix), el('td', {}, keyState(k)),
        cell(limits(k)), cell(k.last_used_at ? new Date(k.last_used_at * 1000).toLocaleString() : 'never'),
        num(u ? u.requests : '—'), num(u ? u.input : '—'), num(u ? u.output : '—'));
    }), 'No API keys. Create one with POST /admin/keys.');
  }

  // readUsage totals every active key's usage (all days and models the store holds).
  async function readUsage(list) {
    const active = list.filter((k) => !k.revoked).slice(0, USAGE_MAX_KEYS);
    const results = await Promise.allSettled(active.map((k) => get(`../admin/keys/${encodeURIComponent(k.id)}/usage`)));
    const next = new Map();
    results.forEach((r, i) => {
      if (r.status !== 'fulfilled') return;
      next.set(active[i].id, r.value.usage.reduce((t, row) => ({
        requests: t.requests + row.requests, input: t.input + row.input_tokens, output: t.output + row.output_tokens,
      }), { requests: 0, input: 0, output: 0 }));
    });
    usage = next;
  }

  function renderSummary(stats, healthz) {
    const parts = [];
    if (healthz.status === 'fulfilled' && healthz.value.version) parts.push(`version ${healthz.value.version}`);
    parts.push(`up ${duration(stats.uptime_secs)}`, count(stats.active_workers, 'relay worker'), count(stats.upstreams, 'upstream'),
      `${stats.in_flight} in flight`);
    if (stats.draining) parts.push('draining');
    parts.push(`updated ${new Date().toLocaleTimeString()}`);
    $('summary').textContent = parts.join(' · ');
  }

  // --- polling ---------------------------------------------------------------------------

  // poll reads everything once and shows it, then comes again unless the session ended. A
  // failure to draw is shown and retried too: one odd answer must not freeze the page.
  async function poll(mine) {
    try {
      await refresh(mine);
    } catch (err) {
      $('stale').textContent = `Could not show the status: ${err.message}`;
      console.error(err);
    }
    if (mine === session) timer = setTimeout(() => poll(mine), POLL_MS);
  }

  async function refresh(mine) {
    const [stats, workers, circuits, keyList, metrics, healthz] = await Promise.allSettled([
      get('../admin/stats'), get('../admin/workers'), get('../admin/circuits'), get('../admin/keys'),
      get('../metrics', true), get('../health'),
    ]);
    if (mine !== session) return;
    const refused = [stats, workers, circuits, keyList].find((r) => r.status === 'rejected' && r.reason instanceof Refused);
    if (refused) {
      signOut(refused.reason.message);
      return;
    }
    showStatus();
    if (stats.status === 'rejected') {
      // Keep what is on screen, say it may be old, and keep trying.
      $('stale').textContent = `Cannot read the relay's status (${stats.reason.message}); retrying. What is shown may be out of date.`;
      return;
    }
    if (keyList.status === 'fulfilled' && polls % USAGE_EVERY_POLLS === 0) {
      await readUsage(keyList.value.keys);
      if (mine !== session) return;
    }
    polls++;

    $('stale').textContent = '';
    const workerList = workers.status === 'fulfilled' ? workers.value.workers : [];
    renderSummary(stats.value, healthz);
    renderPools(stats.value, new Map(workerList.map((w) => [w.worker_id, w])));
    renderWorkers(workerList);
    note('workers-note', workers);
    renderCircuits(circuits.status === 'fulfilled' ? circuits.value.circuits : []);
    note('circuits-note', circuits);
    if (keyList.status === 'fulfilled') {
      renderKeys(keyList.value.keys);
      // While keys are not required the relay says what a key does and does not do.
      $('keys-warning').textContent = keyList.value.warning || '';
    }
    note('keys-note', keyList);
    if (metrics.status === 'fulfilled') addSample(metricTotals(metrics.value));
    renderRates();
  }

  function showStatus() {
    $('login-section').hidden = true;
    $('status').hidden = false;
    $('logout').hidden = false;
  }

  function start() {
    clearTimeout(timer);
    session++;
    polls = 0;
    samples = [];
    usage = new Map();
    poll(session);
  }

  // signOut forgets the token and shows the form, with why when the relay refused it.
  function signOut(message) {
    clearTimeout(timer);
    session++;
    sessionStorage.removeItem(TOKEN_KEY);
    $('status').hidden = true;
    $('logout').hidden = true;
    $('summary').textContent = '';
    $('login-section').hidden = false;
    $('login-message').textContent = message || '';
    $('token').focus();
  }

  $('login').addEventListener('submit', (e) => {
    e.preventDefault();
    const value = $('token').value.trim();
    if (value === '') return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $('token').value = '';
    $('login-message').textContent = '';
    start();
  });
  $('logout').addEventListener('click', () => signOut(''));

  if (token() !== '') start();
  else signOut('');
})();

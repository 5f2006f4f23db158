// The sample browser of report.html: inflates the embedded samples after the first
// paint, builds the filters from the values present, lists the matching samples a page
// at a time and shows one sample in full. Links "#samples?field=value&..." filter it (a
// field given twice matches either value); "#sample=N" opens sample N. A workload's own
// facets (a Probe item's hop, domain, ...) travel as each sample's "f" and become filters.
(function () {
  'use strict';
  const FIELDS = [['model', 'm'], ['condition', 'c'], ['task', 't'], ['regime', 'g'],
    ['seed', 'sd'], ['category', 'cat']];
  const PAGE = 100;
  let samples = null, view = [], page = 0, facets = [];
  // Outputs, parsed answers, prompts and references: inflated when a sample is first opened.
  let details = null, shared = null, loading = null;
  function loadDetails() {
    loading = loading || Promise.all([inflate('data-details'), inflate('data-shared')])
      .then(([d, s]) => { details = d; shared = s; });
    return loading;
  }

  async function inflate(id) {
    // The browser's own base64 decoder (a data: URL) is far faster than atob and a copy.
    const node = document.getElementById(id);
    const packed = await fetch('data:application/octet-stream;base64,' + node.textContent.trim());
    const stream = packed.body.pipeThrough(new DecompressionStream('gzip'));
    const text = await new Response(stream).text();
    performance.mark('inflated ' + id);
    return JSON.parse(text);
  }

  function el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  function select(name, label, values) {
    const wrap = el('label', label + ' ');
    const s = el('select', null, { id: 'f-' + name, name: name });
    s.appendChild(el('option', 'any', { value: '' }));
    for (const v of values) s.appendChild(el('option', v, { value: v }));
    s.addEventListener('change', () => { page = 0; apply(); });
    wrap.appendChild(s);
    return wrap;
  }

  function buildFilters() {
    const form = document.getElementById('filters');
    for (const [name, key] of FIELDS) {
      const seen = new Set();
      for (const s of samples) seen.add(String(s[key]));
      const values = [...seen].filter((v) => v !== '');
      if (values.length === 0) continue;
      values.sort((a, b) => (name === 'seed' ? Number(a) - Number(b) : a.localeCompare(b)));
      const ds = document.getElementById('sample-table').dataset;
      const label = name === 'regime' ? ds.group || name : name === 'category' ? ds.category || name : name;
      form.appendChild(select(name, label, values));
    }
    // Facets in the order they first appear; values sorted, numerically where all are numbers.
    const facetValues = new Map();
    for (const s of samples) {
      for (const [k, v] of Object.entries(s.f || {})) {
        if (!facetValues.has(k)) facetValues.set(k, new Set());
        facetValues.get(k).add(v);
      }
    }
    facets = [...facetValues.keys()];
    for (const name of facets) {
      const values = [...facetValues.get(name)];
      const numeric = values.every((v) => v !== '' && !isNaN(Number(v)));
      values.sort((a, b) => (numeric ? Number(a) - Number(b) : a.localeCompare(b)));
      form.appendChild(select(name, name, values));
    }
    const names = new Set();
    for (const s of samples) for (const k in s.x) names.add(k);
    const metrics = [...names].sort();
    form.appendChild(select('metric', 'metric', metrics));
    const outcome = select('outcome', 'outcome', []);
    const os = outcome.querySelector('select');
    os.appendChild(el('option', '= 1 (right)', { value: '1' }));
    os.appendChild(el('option', '= 0 (wrong)', { value: '0' }));
    form.appendChild(outcome);
    const text = el('label', 'scenario ');
    const input = el('input', null, { id: 'f-scenario', type: 'search', placeholder: 'id contains' });
    input.addEventListener('input', () => { page = 0; apply(); });
    text.appendChild(input);
    form.appendChild(text);
  }

  function value(name) {
    const e = document.getElementById('f-' + name);
    return e ? e.value : '';
  }

  // The values a filter accepts: one, or several where a link named the field twice.
  function accepted(name) {
    const e = document.getElementById('f-' + name);
    if (!e || e.value === '') return null;
    const o = e.selectedOptions && e.selectedOptions[0];
    return o && o.dataset.values ? JSON.parse(o.dataset.values) : [e.value];
  }

  function apply() {
    const want = FIELDS.map(([name, key]) => [key, accepted(name)]).filter(([, v]) => v !== null);
    const wantFacets = facets.map((name) => [name, accepted(name)]).filter(([, v]) => v !== null);
    const metric = value('metric'), outcome = value('outcome'), scenario = value('scenario');
    view = [];
    for (let i = 0; i < samples.length; i++) {
      const s = samples[i];
      if (!want.every(([k, v]) => v.includes(String(s[k])))) continue;
      if (!wantFacets.every(([k, v]) => s.f !== undefined && v.includes(s.f[k]))) continue;
      if (scenario && !s.sc.includes(scenario)) continue;
      if (metric) {
        const x = s.x[metric];
        if (x === undefined) continue;
        if (outcome !== '' && x !== Number(outcome)) continue;
      } else if (outcome !== '' && !Object.values(s.x).some((x) => x === Number(outcome))) continue;
      view.push(i);
    }
    const count = document.getElementById('count');
    count.textContent = view.length + ' of ' + samples.length + ' samples';
    count.dataset.n = String(view.length);
    render();
  }

  function render() {
    const pages = Math.max(1, Math.ceil(view.length / PAGE));
    page = Math.min(page, pages - 1);
    const pager = document.getElementById('pager');
    pager.textContent = '';
    if (pages > 1) {
      const prev = el('button', '‹ previous', { type: 'button' });
      prev.disabled = page === 0;
      prev.onclick = () => { page--; render(); };
      const next = el('button', 'next ›', { type: 'button' });
      next.disabled = page >= pages - 1;
      next.onclick = () => { page++; render(); };
      pager.append(prev, el('span', ' page ' + (page + 1) + ' of ' + pages + ' '), next);
    }
    const table = document.getElementById('sample-table');
    const head = table.tHead;
    // No sample has a group (Probe): no group column.
    const noGroup = table.dataset.noGroup === '1';
    if (!head.rows.length) {
      const tr = head.insertRow();
      const heads = ['#', 'model', 'condition', 'task', 'step', 'seed', 'scenario'];
      if (!noGroup) heads.push(table.dataset.group || 'group');
      heads.push(table.dataset.category || 'category');
      for (const h of heads) tr.appendChild(el('th', h));
      if (facets.length) tr.appendChild(el('th', 'facets'));
      tr.appendChild(el('th', 'output'));
    }
    const body = document.createElement('tbody');
    for (const i of view.slice(page * PAGE, (page + 1) * PAGE)) {
      const s = samples[i];
      const tr = body.insertRow();
      tr.dataset.i = String(i);
      tr.dataset.group = s.g;
      const cells = noGroup ? [i, s.m, s.c, s.t, s.st, s.sd, s.sc, s.cat] : [i, s.m, s.c, s.t, s.st, s.sd, s.sc, s.g, s.cat];
      if (facets.length) cells.push(facetText(s));
      cells.push(s.o);
      for (const v of cells) tr.appendChild(el('td', v));
      if (s.f) tr.dataset.facets = JSON.stringify(s.f);
      tr.onclick = () => { location.hash = 'sample=' + i; };
    }
    table.replaceChild(body, table.tBodies[0]);
  }

  function facetText(s) {
    return Object.entries(s.f || {}).map(([k, v]) => k + ' ' + v).join(' · ');
  }

  function block(title, text) {
    const d = el('div', null, { class: 'block' });
    d.append(el('h4', title), el('pre', text));
    return d;
  }

  async function show(i) {
    const s = samples[i];
    const d = document.getElementById('detail');
    d.textContent = '';
    if (!s) return;
    if (!details) {
      d.textContent = 'loading the outputs and prompts…';
      await loadDetails();
      d.textContent = '';
    }
    const [out, fin, parsed] = details[i];
    d.appendChild(el('h3', 'Sample ' + i + ': ' + [s.m, s.c, s.t, 'step ' + s.st, 'seed ' + s.sd, s.sc, s.g].filter((x) => x !== '').join(' · ')));
    const meta = el('p', 'category ' + s.cat + (s.why ? ' (' + s.why + ')' : '') + '; finish ' + fin + '; request ' + s.id);
    d.appendChild(meta);
    if (s.f) d.appendChild(el('p', facetText(s), { class: 'facets' }));
    const cref = s.r === undefined ? undefined : shared.references[s.r];
    if (cref && cref.conversation) d.appendChild(conversation(i, cref));
    const scores = el('table', null, { class: 'figures' });
    for (const [k, v] of Object.entries(s.x)) {
      const tr = scores.insertRow();
      tr.append(el('th', k), el('td', Number.isInteger(v) ? v : v.toFixed(4)));
    }
    d.append(el('h4', 'Scores'), scores);
    // A prompt travels as the indices of its lines, each distinct line stored once.
    const at = shared.prompts[s.id];
    const prompt = at === undefined ? undefined : at.map((k) => shared.lines[k]).join('\n');
    d.appendChild(block('Prompt', prompt === undefined ? '(this prompt is not in the plan of this report)' : prompt));
    d.appendChild(block('Raw output', out));
    d.appendChild(block('Parsed answer', JSON.stringify(parsed, null, 2)));
    const ref = s.r === undefined ? undefined : shared.references[s.r];
    const shown = ref && ref.conversation ? Object.fromEntries(Object.entries(ref).filter(([k]) => k !== 'conversation')) : ref;
    d.appendChild(block('Reference', ref === undefined ? '(none in this report)' : JSON.stringify(shown, null, 2)));
    d.scrollIntoView();
  }

  // A workload whose references carry a conversation (Probe): the sessions in order, the
  // contradicting turn marked, then every question of the item this model and seed were
  // asked, with its answer, the right answer and the outcome.
  const ORDER = { pre: 0, post: 1, followup: 2, before_any_fact: 0, after_first_fact: 1, after_second_fact: 2 };
  function conversation(i, ref) {
    const s = samples[i];
    const box = el('div', null, { class: 'conversation', id: 'conversation' });
    box.appendChild(el('h4', 'Conversation'));
    for (const ses of ref.conversation.sessions) {
      box.appendChild(el('div', ses.title, { class: 'session' }));
      ses.turns.forEach((t, k) => {
        const row = el('div');
        const marked = ses.mark && k === ses.turns.length - 1;
        row.appendChild(el('span', 'User: ' + t, { class: marked ? 'turn contradicting' : 'turn' }));
        if (marked) row.appendChild(el('div', '\u25b2 ' + ses.mark, { class: 'mark' }));
        box.appendChild(row);
      });
    }
    const asked = [];
    for (let j = 0; j < samples.length; j++) {
      const o = samples[j];
      if (o.sc === s.sc && o.m === s.m && o.sd === s.sd && o.c === s.c) asked.push(j);
    }
    const rank = (j) => (ORDER[samples[j].t] === undefined ? 9 : ORDER[samples[j].t]);
    asked.sort((a, b) => rank(a) - rank(b) || samples[a].st - samples[b].st || a - b);
    const t = el('table', null, { class: 'questions' });
    const head = t.createTHead().insertRow();
    for (const h of ['question', 'when', 'answer', 'right answer', 'outcome']) head.appendChild(el('th', h));
    const body = t.createTBody();
    for (const j of asked) {
      const o = samples[j];
      const r = (o.r !== undefined && shared.references[o.r]) || {};
      const tr = body.insertRow();
      if (j === i) tr.className = 'current';
      const gold = r.gold !== undefined ? r.gold
        : r.gold_invalidated !== undefined ? 'marks ' + r.gold_invalidated.join(', ') + '; ' + r.gold_axis : '';
      const right = o.x.correct;
      const x = o.x;
      const outcome = x.invalidation_gold !== undefined
        ? 'marked ' + x.invalidation_hits + ' of ' + x.invalidation_gold + ' (' + x.invalidation_predicted + ' in all); kind ' + (x.axis_correct === 1 ? 'right' : 'wrong')
        : o.cat + (right === 1 ? ' (right)' : right === 0 ? ' (wrong)' : '');
      const q = el('td');
      q.append(el('b', o.t + ': '), document.createTextNode(r.question || ''));
      tr.append(q, el('td', r.conversation ? r.conversation.asked : ''), el('td', details[j][0]), el('td', gold),
        el('td', outcome, { class: right === 1 ? 'outcome-correct' : right === 0 ? 'outcome-wrong' : '' }));
      tr.onclick = () => { location.hash = 'sample=' + j; };
    }
    box.append(el('h4', 'Questions of this item (' + [s.m, 'seed ' + s.sd].join(', ') + ')'), t);
    return box;
  }

  function fromHash() {
    if (!samples) return;
    const h = decodeURIComponent(location.hash.slice(1));
    if (h.startsWith('sample=')) { show(Number(h.slice(7))); return; }
    if (!location.hash.startsWith('#samples')) return;
    const q = new URLSearchParams(location.hash.split('?')[1] || '');
    for (const e of document.querySelectorAll('#filters select, #filters input')) {
      const all = q.getAll(e.name || e.id.slice(2));
      for (const o of [...e.querySelectorAll('option[data-values]')]) o.remove();
      if (all.length > 1 && e.tagName === 'SELECT') {
        // Several values of one field (both conditions of a contrast): one option for them.
        e.appendChild(el('option', all.join(' or '), { value: all.join(' | '), 'data-values': JSON.stringify(all) }));
        e.value = all.join(' | ');
      } else {
        e.value = all.length ? all[0] : '';
      }
    }
    page = 0;
    apply();
    document.getElementById('samples').scrollIntoView();
  }

  async function start() {
    if (!document.getElementById('data-samples')) return;
    try {
      samples = await inflate('data-samples');
    } catch (e) {
      document.getElementById('count').textContent = 'the sample data cannot be read: ' + e;
      throw e;
    }
    performance.mark('parsed');
    buildFilters();
    performance.mark('filters');
    apply();
    performance.mark('listed');
    window.addEventListener('hashchange', fromHash);
    fromHash();
    document.body.dataset.ready = '1';
  }

  // After the first paint, so that the tables show while the samples inflate; or after
  // a short wait where no frame comes soon (a tab opened in the background, a headless
  // browser on a busy machine), so that the browser never waits on a frame to start.
  let started = false;
  const startOnce = () => {
    if (!started) {
      started = true;
      start();
    }
  };
  requestAnimationFrame(() => setTimeout(startOnce, 0));
  setTimeout(startOnce, 250);
})();

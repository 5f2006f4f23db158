// The sample browser of report.html: inflates the embedded samples after the first
// paint, builds the filters from the values present, lists the matching samples a page
// at a time and shows one sample in full. Links "#samples?field=value&..." filter it;
// "#sample=N" opens sample N.
(function () {
  'use strict';
  const FIELDS = [['model', 'm'], ['condition', 'c'], ['task', 't'], ['regime', 'g'],
    ['seed', 'sd'], ['category', 'cat']];
  const PAGE = 100;
  let samples = null, view = [], page = 0;
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
      const label = name === 'regime' ? document.getElementById('sample-table').dataset.group || name : name;
      form.appendChild(select(name, label, values));
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

  function apply() {
    const want = FIELDS.map(([name, key]) => [key, value(name)]).filter(([, v]) => v !== '');
    const metric = value('metric'), outcome = value('outcome'), scenario = value('scenario');
    view = [];
    for (let i = 0; i < samples.length; i++) {
      const s = samples[i];
      if (!want.every(([k, v]) => String(s[k]) === v)) continue;
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
    if (!head.rows.length) {
      const tr = head.insertRow();
      for (const h of ['#', 'model', 'condition', 'task', 'step', 'seed', 'scenario',
        table.dataset.group || 'group', 'category', 'output']) tr.appendChild(el('th', h));
    }
    const body = document.createElement('tbody');
    for (const i of view.slice(page * PAGE, (page + 1) * PAGE)) {
      const s = samples[i];
      const tr = body.insertRow();
      tr.dataset.i = String(i);
      tr.dataset.group = s.g;
      for (const v of [i, s.m, s.c, s.t, s.st, s.sd, s.sc, s.g, s.cat, s.o]) {
        tr.appendChild(el('td', v));
      }
      tr.onclick = () => { location.hash = 'sample=' + i; };
    }
    table.replaceChild(body, table.tBodies[0]);
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
    const scores = el('table', null, { class: 'figures' });
    for (const [k, v] of Object.entries(s.x)) {
      const tr = scores.insertRow();
      tr.append(el('th', k), el('td', Number.isInteger(v) ? v : v.toFixed(4)));
    }
    d.append(el('h4', 'Scores'), scores);
    const prompt = shared.prompts[s.id];
    d.appendChild(block('Prompt', prompt === undefined ? '(this prompt is not in the plan of this report)' : prompt));
    d.appendChild(block('Raw output', out));
    d.appendChild(block('Parsed answer', JSON.stringify(parsed, null, 2)));
    const ref = s.r === undefined ? undefined : shared.references[s.r];
    d.appendChild(block('Reference', ref === undefined ? '(none in this report)' : JSON.stringify(ref, null, 2)));
    d.scrollIntoView();
  }

  function fromHash() {
    if (!samples) return;
    const h = decodeURIComponent(location.hash.slice(1));
    if (h.startsWith('sample=')) { show(Number(h.slice(7))); return; }
    if (!location.hash.startsWith('#samples')) return;
    const q = new URLSearchParams(location.hash.split('?')[1] || '');
    for (const e of document.querySelectorAll('#filters select, #filters input')) {
      const v = q.get(e.name || e.id.slice(2));
      e.value = v === null ? '' : v;
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

  // After the first paint: the tables show while the samples inflate.
  requestAnimationFrame(() => setTimeout(start, 0));
})();

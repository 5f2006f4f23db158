// Assertions on the rendered report.html, run inside headless Chromium. scripts/browser-check
// injects this after the page's own script, with scores.json as #expected-scores and an
// error trap at the top of <head>; the results land in #check-results for --dump-dom.
(async function () {
  'use strict';
  const results = [];
  const check = (name, pass, detail) => results.push({ name, pass: !!pass, detail: String(detail || '') });
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  try {
    const scores = JSON.parse(document.getElementById('expected-scores').textContent);
    for (let i = 0; i < 400 && document.body.dataset.ready !== '1'; i++) await sleep(25);
    check('the sample browser loaded its data', document.body.dataset.ready === '1', '');

    // Tables hold the figures of scores.json: every pooled and per-regime estimate of a
    // metric that the headline table shows has a cell, and the cell shows its mean and
    // interval to three decimals.
    const shown = new Set([...document.querySelectorAll('#headline thead th[title]')].map((th) => th.title));
    let cells = 0; const missing = [], wrong = [];
    const near = (text, v) => Math.abs(parseFloat(text) - v) <= 0.0005 + 1e-9;
    for (const e of scores.estimates) {
      if (e.seed !== null && e.seed !== undefined) continue;
      if (!shown.has(e.task + ' ' + e.metric)) continue;
      const key = [e.model, e.condition, e.task, e.metric, e.regime || ''].join('|');
      const td = document.querySelector('td[data-cell="' + CSS.escape(key) + '"]');
      if (!td) { missing.push(key); continue; }
      cells++;
      const m = td.querySelector('small').textContent.match(/\[(.+), (.+)\]/);
      if (!near(td.querySelector('a').textContent, e.mean) || !m || !near(m[1], e.lo) || !near(m[2], e.hi)) {
        wrong.push(key + ': ' + td.textContent + ' vs ' + e.mean);
      }
    }
    check('every headline and per-regime figure of scores.json is in a table cell',
      cells > 0 && missing.length === 0, cells + ' cells; missing: ' + missing.slice(0, 5).join('; '));
    check('each such cell shows the figure of scores.json', wrong.length === 0, wrong.slice(0, 5).join('; '));

    // Filtering the browser to one regime shows exactly that regime's samples. Every
    // sample has a contract_failure value, so the scorer's per-regime counts add up to
    // the number of samples in the regime.
    const perRegime = {};
    for (const e of scores.estimates) {
      if (e.regime && (e.seed === null || e.seed === undefined) && e.metric === 'contract_failure') {
        perRegime[e.regime] = (perRegime[e.regime] || 0) + e.values;
      }
    }
    const regimes = Object.keys(perRegime).sort();
    check('scores.json has per-regime counts', regimes.length > 0, regimes.join(', '));
    for (const regime of regimes) {
      const sel = document.getElementById('f-regime');
      sel.value = regime;
      sel.dispatchEvent(new Event('change'));
      const n = Number(document.getElementById('count').dataset.n);
      const rows = [...document.querySelectorAll('#sample-table tbody tr')];
      const others = rows.filter((tr) => tr.dataset.group !== regime).length;
      check('regime filter ' + regime + ': count equals the scorer\'s',
        n === perRegime[regime] && rows.length === Math.min(n, 100) && others === 0,
        'shown ' + n + ', rows ' + rows.length + ', other regimes ' + others + ', scores.json ' + perRegime[regime]);
    }
    document.getElementById('f-regime').value = '';
    document.getElementById('f-regime').dispatchEvent(new Event('change'));

    // A sample opens with its prompt, output, parsed answer and reference.
    location.hash = 'sample=0';
    for (let i = 0; i < 400 && !document.querySelector('#detail .block'); i++) await sleep(25);
    const blocks = [...document.querySelectorAll('#detail .block')].map((b) => [b.querySelector('h4').textContent, b.querySelector('pre').textContent]);
    const text = Object.fromEntries(blocks);
    check('a sample shows prompt, raw output, parsed answer and reference',
      (text['Prompt'] || '').length > 200 && !text['Prompt'].startsWith('(') && 'Raw output' in text
        && (text['Parsed answer'] || '').includes('contract') && (text['Reference'] || '').length > 2,
      blocks.map(([h, t]) => h + ' ' + t.length).join(', '));

    // A table cell's link filters the browser to the samples behind it.
    const link = document.querySelector('#regimes td[data-cell] a');
    location.hash = link.getAttribute('href').slice(1);
    await sleep(50);
    const q = new URLSearchParams(link.getAttribute('href').split('?')[1]);
    const rows = [...document.querySelectorAll('#sample-table tbody tr')];
    check('a cell link filters the browser', rows.length > 0 && q.get('regime') && rows.every((tr) => tr.dataset.group === q.get('regime')),
      link.getAttribute('href') + ' -> ' + rows.length + ' rows');

    const paint = performance.getEntriesByType('paint').find((p) => p.name === 'first-contentful-paint');
    check('first contentful paint recorded', paint, paint ? paint.startTime.toFixed(0) + ' ms' : 'none');
    results.push({ name: 'first-contentful-paint-ms', pass: true, detail: paint ? paint.startTime.toFixed(0) : '' });
  } catch (e) {
    check('the checks ran to the end', false, e && e.stack ? e.stack : e);
  }
  check('no console errors or uncaught exceptions', window.__checkErrors.length === 0, window.__checkErrors.join(' | '));
  const out = document.createElement('pre');
  out.id = 'check-results';
  out.textContent = 'CHECK-RESULTS ' + JSON.stringify(results) + ' END-CHECK-RESULTS';
  document.body.appendChild(out);
  document.title = 'checked';
})();

// Assertions on a Probe run's report.html, run inside headless Chromium the way check.js
// runs on CREG's: scripts/browser-check injects this when scores.json is a Probe one, with
// scores.json as #expected-scores and an error trap at the top of <head>; the results
// land in #check-results for --dump-dom.
(async function () {
  'use strict';
  const results = [];
  const check = (name, pass, detail) => results.push({ name, pass: !!pass, detail: String(detail || '') });
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const near = (text, v) => Math.abs(parseFloat(text) - v) <= 0.0005 + 1e-9;
  try {
    const scores = JSON.parse(document.getElementById('expected-scores').textContent);
    for (let i = 0; i < 1600 && document.body.dataset.ready !== '1'; i++) await sleep(25);
    check('the sample browser loaded its data', document.body.dataset.ready === '1', '');
    const systems = Object.fromEntries(scores.systems.map((s) => [s.system, s]));
    const core = scores.systems.filter((s) => s.probe);

    // The set run is named at the top.
    const set = document.getElementById('set');
    check('the set run is stated at the top', set && /Set run: (the generated set|the published set|a user's file)/.test(set.textContent)
      && set.getBoundingClientRect().top < 400, set ? set.textContent.slice(0, 80) : 'none');

    // Every table cell holds the figure of scores.json it names ("system|path").
    let cells = 0; const wrong = [], missing = [];
    for (const td of document.querySelectorAll('td[data-cell]')) {
      const [system, path] = td.dataset.cell.split('|');
      let e = systems[system];
      for (const k of path.split('/')) e = e === undefined || e === null ? undefined : e[k];
      if (td.classList.contains('na')) { if (e) wrong.push(td.dataset.cell + ': dash for ' + e.mean); continue; }
      if (!e) { missing.push(td.dataset.cell); continue; }
      cells++;
      const m = td.querySelector('small').textContent.match(/\[(.+), (.+)\] n (\d+)/);
      if (!near((td.querySelector('a') || td).textContent, e.mean) || !m || !near(m[1], e.lo) || !near(m[2], e.hi) || Number(m[3]) !== e.clusters) {
        wrong.push(td.dataset.cell + ': ' + td.textContent + ' vs ' + JSON.stringify(e));
      }
    }
    check('every table cell shows the figure of scores.json it names, with its interval and n',
      cells > 0 && wrong.length === 0 && missing.length === 0,
      cells + ' cells; wrong: ' + wrong.slice(0, 3).join('; ') + ' missing: ' + missing.slice(0, 3).join('; '));
    const headline = document.querySelectorAll('#headline-table tbody tr').length;
    check('the headline has one row per system', headline === core.length, headline + ' rows, ' + core.length + ' systems');
    const heads = [...document.querySelectorAll('table.figures th')].map((th) => th.textContent);
    const snake = heads.filter((h) => /[a-z]_[a-z]/.test(h) && !systems[h] && !scores.systems.some((s) => h.startsWith(s.system)));
    check('no snake_case keys in table headings', snake.length === 0, snake.slice(0, 5).join(', '));

    // The figures are there with visible series; the hop figure's points are scores.json's.
    const visible = (node) => { const r = node.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
    for (const id of ['fig-hop', 'fig-abstention', 'fig-invalidation', 'fig-chain']) {
      const svg = document.querySelector('#' + id + ' svg');
      const series = svg ? [...svg.querySelectorAll('g.series')] : [];
      const shown = series.filter((g) => [...g.querySelectorAll('circle.point')].some(visible));
      check('figure ' + id + ' is drawn with visible series', svg && visible(svg) && shown.length > 0,
        shown.length + ' of ' + series.length + ' series with visible points');
    }
    const hop = [...document.querySelectorAll('#fig-hop g.series')];
    check('the hop figure has asserted and derived series per system', hop.length === 2 * core.length,
      hop.map((g) => g.dataset.series).join(', '));
    let points = 0; const off = [];
    for (const g of hop) {
      const label = g.dataset.series;
      const sys = core.length > 1 ? core.find((s) => label.startsWith(s.system + ': ')) : core[0];
      const arm = label.includes('derived') ? 'derived' : 'asserted';
      for (const c of g.querySelectorAll('circle.point')) {
        points++;
        const e = sys && sys.probe.by.hop_x_contradicted[c.dataset.x.replace('hop ', '') + ' ' + arm];
        if (!e || !near(c.dataset.mean, e.mean) || !near(c.dataset.lo, e.lo) || !near(c.dataset.hi, e.hi)) off.push(label + ' ' + c.dataset.x);
      }
    }
    check('each hop figure point is the accuracy of scores.json', points > 0 && off.length === 0, points + ' points; off: ' + off.slice(0, 3).join('; '));

    // Filters by outcome, hop, axis and domain, and filtering by hop keeps that hop only.
    for (const f of ['category', 'hop', 'axis', 'domain']) {
      const sel = document.getElementById('f-' + f);
      check('the browser filters by ' + f, sel && sel.options.length > 1, sel ? sel.options.length - 1 + ' values' : 'none');
    }
    const hops = [...document.getElementById('f-hop').options].map((o) => o.value).filter((v) => v !== '');
    const deepest = hops[hops.length - 1];
    location.hash = 'samples?hop=' + deepest + '&question=post';
    await sleep(50);
    const rows = [...document.querySelectorAll('#sample-table tbody tr')];
    check('filtering by hop shows that hop only', rows.length > 0 && rows.every((tr) => JSON.parse(tr.dataset.facets).hop === deepest),
      rows.length + ' rows of hop ' + deepest);
    // No Probe sample has a group: no empty group column, and each row fits the header.
    const sampleHeads = [...document.querySelectorAll('#sample-table thead th')].map((th) => th.textContent);
    check('the sample list has no empty group column', sampleHeads.length > 0 && !sampleHeads.includes('group')
      && !sampleHeads.includes('regime') && rows.every((tr) => tr.cells.length === sampleHeads.length),
      sampleHeads.join(', '));

    // An item opens as its conversation: the turns in order, the contradicting one marked,
    // and the item's questions with answer, right answer and outcome.
    const first = rows[0];
    location.hash = 'sample=' + first.dataset.i;
    for (let i = 0; i < 400 && !document.querySelector('#conversation'); i++) await sleep(25);
    const conv = document.querySelector('#conversation');
    const sessions = conv ? conv.querySelectorAll('.session').length : 0;
    const turns = conv ? [...conv.querySelectorAll('.turn')] : [];
    const marked = turns.filter((t) => t.classList.contains('contradicting'));
    check('a sample opens as its conversation, turns in order', conv && visible(conv) && sessions >= 2 && turns.length >= sessions
      && /^Session 1 /.test(conv.querySelector('.session').textContent), sessions + ' sessions, ' + turns.length + ' turns');
    check('the contradicting turn is marked, and is the last', marked.length === 1 && turns[turns.length - 1] === marked[0],
      marked.length + ' marked');
    const qrows = conv ? [...conv.querySelectorAll('table.questions tbody tr')] : [];
    const kinds = qrows.map((tr) => tr.cells[0].textContent.split(':')[0]);
    check('the conversation lists the item\'s questions with answer, right answer and outcome',
      kinds.includes('pre') && kinds.includes('post') && qrows.every((tr) => tr.cells.length === 5 && tr.cells[4].textContent.length > 0)
        && qrows.some((tr) => tr.classList.contains('current')), kinds.join(', '));

    // Every in-page link resolves: sections exist, sample-browser links show samples (a
    // breakdown cell's link exactly the samples it counts).
    const links = [...document.querySelectorAll('a[href^="#"]')];
    const broken = [];
    let filtered = 0;
    for (const a of links) {
      const href = a.getAttribute('href');
      if (href.startsWith('#samples?')) {
        location.hash = href.slice(1);
        await sleep(0);
        const n = Number(document.getElementById('count').dataset.n);
        const td = a.closest('td[data-cell]');
        let e = null;
        if (td && td.dataset.cell.includes('|probe/by/')) {
          const [system, path] = td.dataset.cell.split('|');
          e = path.split('/').reduce((o, k) => (o ? o[k] : undefined), systems[system]);
        }
        filtered++;
        if (!(n > 0) || (e && n !== e.values)) broken.push(href + ' -> ' + n + (e ? ' (scores.json ' + e.values + ')' : ''));
      } else if (href.startsWith('#sample=')) {
        if (!(Number(href.slice(8)) >= 0)) broken.push(href);
      } else if (!document.getElementById(decodeURIComponent(href.slice(1)))) {
        broken.push(href);
      }
    }
    check('every in-page link resolves', links.length > 0 && broken.length === 0,
      links.length + ' links, ' + filtered + ' into the browser; broken: ' + broken.slice(0, 4).join('; '));
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

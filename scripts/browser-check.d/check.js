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
    // A baseline's report has no sample browser: its checks are skipped, the rest hold.
    const hasBrowser = !!document.getElementById('data-samples');
    if (hasBrowser) {
      for (let i = 0; i < 400 && document.body.dataset.ready !== '1'; i++) await sleep(25);
      check('the sample browser loaded its data', document.body.dataset.ready === '1', '');
    }

    // Layout at the window scripts/browser-check opens (1280 px wide): the headline table
    // fits its section without a scroll box of its own, and the page never scrolls sideways.
    const root = document.documentElement;
    const headline = document.querySelector('#headline table');
    const boxed = (el) => {
      for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
        const o = getComputedStyle(e).overflowX;
        if (o === 'auto' || o === 'scroll' || o === 'hidden') return e.tagName.toLowerCase() + '.' + e.className;
      }
      return '';
    };
    check('the window is 1280 px wide', window.innerWidth === 1280, 'innerWidth ' + window.innerWidth);
    check('the headline table fits 1280 px without scrolling',
      headline && headline.scrollWidth <= headline.parentElement.clientWidth
        && headline.getBoundingClientRect().right <= root.clientWidth && !boxed(headline),
      headline ? 'table ' + headline.scrollWidth + ' px, section ' + headline.parentElement.clientWidth
        + ' px, right edge ' + Math.round(headline.getBoundingClientRect().right) + ' of ' + root.clientWidth
        + (boxed(headline) ? ', inside a scroll box ' + boxed(headline) : '') : 'no headline table');
    check('the page has no horizontal scroll at 1280 px', root.scrollWidth <= root.clientWidth,
      'page ' + root.scrollWidth + ' px, window ' + root.clientWidth + ' px; widest: '
        + [...document.querySelectorAll('main > section > *')]
          .filter((e) => e.getBoundingClientRect().right > root.clientWidth)
          .map((e) => e.parentElement.id + ' ' + e.tagName.toLowerCase() + ' ' + Math.round(e.getBoundingClientRect().right))
          .slice(0, 5).join('; '));

    // Every in-page link leads somewhere: #id to an element; #samples?filters to the
    // sample browser; #sample=N to a sample the browser holds.
    const nSamples = Number((document.getElementById('count') || { dataset: {} }).dataset.n || 0);
    const dangling = [];
    const inPage = [...document.querySelectorAll('a[href^="#"]')];
    for (const a of inPage) {
      const frag = decodeURIComponent(a.getAttribute('href').slice(1));
      const m = frag.match(/^sample=(\d+)$/);
      const ok = m ? hasBrowser && document.getElementById('samples') && Number(m[1]) < nSamples
        : frag.split('?')[0] !== '' && document.getElementById(frag.split('?')[0]);
      if (!ok) dangling.push(a.getAttribute('href'));
    }
    check('every in-page link resolves', dangling.length === 0,
      inPage.length + ' links; ' + dangling.length + ' dangling: ' + [...new Set(dangling)].slice(0, 5).join(' '));

    // The reliability diagram shows its series, each told apart (colour, marker and dash)
    // with coinciding lines named in the legend, or it says in words why it is empty.
    const rel = document.querySelector('#reliability svg');
    const series = rel ? [...rel.querySelectorAll('polyline')] : [];
    const drawn = series.filter((l) => (l.getAttribute('points') || '').trim() !== '');
    const styles = new Set(series.map((l) => l.getAttribute('stroke') + ' ' + (l.getAttribute('stroke-dasharray') || '')));
    const byPoints = {};
    for (const l of drawn) { const k = l.getAttribute('points'); byPoints[k] = (byPoints[k] || 0) + 1; }
    const coinciding = Object.values(byPoints).filter((n) => n > 1).reduce((a, n) => a + n - 1, 0);
    const overlapNotes = rel ? rel.querySelectorAll('text.overlap').length : 0;
    const why = [...document.querySelectorAll('#reliability-empty, #reliability svg text.empty')].map((e) => e.textContent.trim()).join(' ');
    check('the reliability diagram has visible series or says why it is empty',
      rel && ((drawn.length > 0 && styles.size === series.length) || (series.length === 0 && why.length > 20)),
      series.length + ' series, ' + drawn.length + ' drawn, ' + styles.size + ' distinct styles' + (why ? '; says: ' + why.slice(0, 160) : ''));
    check('coinciding reliability lines are named in the legend', overlapNotes >= coinciding,
      coinciding + ' lines on top of another, ' + overlapNotes + ' legend notes');

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
      // A figure resting on stand-ins only (nothing answered) is withheld: a dash and
      // the count stand in its place.
      if (td.classList.contains('na')) {
        if (!/^–0 of \d+ answered$/.test(td.textContent.trim())) wrong.push(key + ': ' + td.textContent);
        continue;
      }
      const m = td.querySelector('small').textContent.match(/\[(.+), (.+)\]/);
      if (!near((td.querySelector('.mean') || td.querySelector('a')).textContent, e.mean) || !m || !near(m[1], e.lo) || !near(m[2], e.hi)) {
        wrong.push(key + ': ' + td.textContent + ' vs ' + e.mean);
      }
    }
    check('every headline and per-regime figure of scores.json is in a table cell',
      cells > 0 && missing.length === 0, cells + ' cells; missing: ' + missing.slice(0, 5).join('; '));
    check('each such cell shows the figure of scores.json', wrong.length === 0, wrong.slice(0, 5).join('; '));

    if (hasBrowser) {
      // Filtering the browser to one regime shows exactly that regime's samples. Every
      // sample has a contract_failure value, so the scorer's per-regime counts add up to
      // the number of samples in the regime.
      const perRegime = {};
      for (const e of scores.estimates) {
        if (e.regime && (e.seed === null || e.seed === undefined) && e.metric === 'contract_failure' && e.task !== 'all') {
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
    }

    const fcp = () => performance.getEntriesByType('paint').find((p) => p.name === 'first-contentful-paint');
    for (let i = 0; i < 40 && !fcp(); i++) await sleep(25);
    const paint = fcp();
    // Headless Chromium records no paint for a page without the sample browser (a
    // baseline's): its timing is the sample data's, so it is required only with one.
    check('first contentful paint recorded', paint || !hasBrowser, paint ? paint.startTime.toFixed(0) + ' ms' : 'none');
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

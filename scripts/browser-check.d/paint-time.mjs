// Time to first paint of a report.html in headless Chromium, on the real clock (the
// checks run under virtual time, whose clock is not the wall's). Drives Chromium over the
// DevTools protocol; needs Node 20+ (run with --experimental-websocket on Node 20).
//
//   node --experimental-websocket scripts/browser-check.d/paint-time.mjs REPORT.html [RUNS]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const file = resolve(process.argv[2]);
const runs = Number(process.argv[3] || 5);
const profile = mkdtempSync(join(tmpdir(), 'paint-'));
const chrome = spawn('chromium', ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
  '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--user-data-dir=' + profile, '--remote-debugging-port=0', '--window-size=1400,1000', 'about:blank'],
{ stdio: ['ignore', 'ignore', 'pipe'] });
const wsUrl = await new Promise((ok, fail) => {
  let err = '';
  chrome.stderr.on('data', (d) => {
    err += d;
    const m = err.match(/DevTools listening on (ws:\/\/\S+)/);
    if (m) ok(m[1]);
  });
  chrome.on('exit', () => fail(new Error('chromium exited: ' + err)));
});
const ws = new WebSocket(wsUrl);
await new Promise((ok) => ws.addEventListener('open', ok));
let next = 0; const pending = new Map();
ws.addEventListener('message', (e) => {
  const m = JSON.parse(e.data);
  if (m.id && pending.has(m.id)) { pending.get(m.id)(m); pending.delete(m.id); }
});
const send = (method, params = {}, sessionId) => new Promise((ok) => {
  const id = ++next; pending.set(id, ok);
  ws.send(JSON.stringify({ id, method, params, sessionId }));
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const results = [];
for (let i = 0; i < runs; i++) {
  const { result: { targetId } } = await send('Target.createTarget', { url: 'about:blank' });
  const { result: { sessionId } } = await send('Target.attachToTarget', { targetId, flatten: true });
  await send('Page.enable', {}, sessionId);
  await send('Page.navigate', { url: 'file://' + file }, sessionId);
  let r = null;
  for (let k = 0; k < 600; k++) {
    await sleep(50);
    const out = await send('Runtime.evaluate', {
      returnByValue: true,
      expression: `(() => { const p = performance.getEntriesByType('paint').find((e) => e.name === 'first-contentful-paint');
        const n = performance.getEntriesByType('navigation')[0];
        return document.body && document.body.dataset.ready === '1' && p && n && n.loadEventEnd > 0
          ? Object.assign({ fcp: p.startTime, dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, ready: performance.now() },
              Object.fromEntries(performance.getEntriesByType('mark').map((m) => [m.name, m.startTime]))) : null; })()`,
    }, sessionId);
    if (out.result && out.result.result && out.result.result.value) { r = out.result.result.value; break; }
  }
  results.push(r);
  await send('Target.closeTarget', { targetId });
}
const med = (k) => { const v = results.filter(Boolean).map((r) => r[k]).sort((a, b) => a - b); return v.length ? v[Math.floor(v.length / 2)].toFixed(0) : 'n/a'; };
console.log(`${file}: median of ${runs} loads: first contentful paint ${med('fcp')} ms, DOMContentLoaded ${med('dcl')} ms, load ${med('load')} ms, samples browsable by ${med('ready')} ms (polled every 50 ms); marks: ${Object.keys(results[0] || {}).filter((k) => !['fcp', 'dcl', 'load', 'ready'].includes(k)).map((k) => k + ' ' + med(k)).join(', ')}`);
ws.close();
const exited = new Promise((ok) => chrome.on('exit', ok));
chrome.kill();
await exited;
try { rmSync(profile, { recursive: true, force: true }); } catch { /* a temp folder left behind */ }
process.exit(0);

window.__checkErrors = [];
window.addEventListener('error', (e) => window.__checkErrors.push('error: ' + e.message));
window.addEventListener('unhandledrejection', (e) => window.__checkErrors.push('unhandled rejection: ' + e.reason));
(function () {
  const original = console.error;
  console.error = function (...args) { window.__checkErrors.push('console.error: ' + args.join(' ')); original.apply(console, args); };
})();

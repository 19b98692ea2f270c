// Run by scripts/test-package.mjs inside a fresh app: a CommonJS require() of memscope's entries
// throws one Error whose message says memscope is ESM-only and how to load it instead.
'use strict';
for (const entry of ['memscope', 'memscope/tfjs', 'memscope/torch', 'memscope/allocator', 'memscope/node']) {
  let message = null;
  try {
    require(entry);
  } catch (err) {
    message = String(err && err.message);
  }
  if (message === null || !/^memscope is ESM-only: load it with import\(\)/.test(message) || message.includes('\n')) {
    process.stderr.write(`require-check: FAILED require('${entry}') ${message === null ? 'returned' : `threw: ${message}`}\n`);
    process.exit(1);
  }
  process.stdout.write(`ok require('${entry}'): ${message}\n`);
}

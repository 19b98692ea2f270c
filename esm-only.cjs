// What `require('memscope')` (and any memscope/* entry) resolves to: package.json's "require"
// conditions point here. memscope is ES modules only; without this file a CommonJS caller gets
// ERR_PACKAGE_PATH_NOT_EXPORTED, which does not say what to do instead.
'use strict';
const error = new Error(
  "memscope is ESM-only: load it with import() from CommonJS (const { MemTracker } = await import('memscope/tfjs')) " +
    'or use import in an ES module (.mjs, or "type": "module" in package.json)',
);
error.code = 'ERR_REQUIRE_ESM';
throw error;

// Injected by scripts/build-cli.mjs into the CommonJS builds: what `import.meta.url` is in the
// ES module sources (the file's own URL), for modules that find neighbours or `require` lazily.
export const importMetaUrl = require('node:url').pathToFileURL(__filename).href;

// Where benchmarks find their input files: the copies in test/fixtures (the same files the unit
// tests read), so `npm run bench` needs nothing outside the clone. A missing file ends the
// benchmark with one line naming it and a non-zero exit, never a silent skip.
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** `test/fixtures/<rel>`, or exit 1 with a message naming the missing file. */
export function benchInput(rel) {
  const path = resolve(repoRoot, 'test/fixtures', rel);
  if (!existsSync(path)) {
    console.error(`bench input missing: test/fixtures/${rel} (see test/fixtures/README.md)`);
    process.exit(1);
  }
  return path;
}

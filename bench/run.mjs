#!/usr/bin/env node
// Runs every bench/*.bench.mjs in its own process (so one benchmark's heap and
// TFJS engine never skew another's), in name order. `npm run bench -- NAME`
// runs only the benchmarks whose file name contains NAME.
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2] ?? '';
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.mjs') && f.includes(filter))
  .sort();
let failed = 0;
for (const f of files) {
  console.log(`\n=== ${f}`);
  const r = spawnSync(process.execPath, ['--expose-gc', join(here, f)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
if (files.length === 0) console.log(`no benchmark matches ${JSON.stringify(filter)}`);
process.exitCode = failed ? 1 : 0;

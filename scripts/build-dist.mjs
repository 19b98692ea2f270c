#!/usr/bin/env node
// Builds dist/ for npm's lifecycle scripts (package.json):
//   prepare (`npm install`/`npm ci` in a clone, and a git install, which runs only `prepare`):
//     --if-missing builds only when dist/ has no bin, so a clone and a git install get a working
//     package while an install in a built clone costs nothing (`npm test` rebuilds anyway).
//   prepack (`npm pack`, `npm publish`): --clean removes dist/ and builds it anew, so the
//     tarball holds exactly the build of the sources, without files an older layout left.
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const mode = process.argv[2];
if (mode !== '--if-missing' && mode !== '--clean') {
  process.stderr.write('usage: node scripts/build-dist.mjs --if-missing | --clean\n');
  process.exit(2);
}
if (mode === '--if-missing' && existsSync(join(root, 'dist/cli/memscope.cjs'))) process.exit(0);
if (mode === '--clean') rmSync(join(root, 'dist'), { recursive: true, force: true });

const npm = process.env['npm_execpath'];
// Under npm, npm_execpath is npm's own CLI script: run it with this node, not whichever npm is on PATH.
const result = npm
  ? spawnSync(process.execPath, [npm, 'run', '-s', 'build'], { cwd: root, stdio: 'inherit' })
  : spawnSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
if (result.error) throw result.error;
process.exit(result.status ?? 1);

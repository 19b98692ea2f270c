#!/usr/bin/env node
// memscope as users install it (`npm run test:package`; .ci/run runs it after the unit and corpus
// tests). Packs the tarball from an unbuilt copy of the working tree (prepack builds dist/),
// installs it into fresh apps in a temporary folder beside TFJS from the npm registry, and runs
// what a user would, under this machine's Node and under Nodes 22 and 24 (the registry packages
// node-linux-<arch>@22 and @24, whose tarballs hold a Node binary):
//   union app (memscope + @tensorflow/tfjs + typescript): `npx memscope demo`, a demo on a backend
//     that is not installed (one line naming the package), a memscope from another folder (as a
//     global install is) saying in one line that it cannot see the project's TFJS, `npx memscope
//     summary` on a fixture, an ES module using the API, CommonJS require() getting the ESM-only
//     message, `tsc --noEmit` on examples/typed-usage.ts;
//   parts app (memscope + tfjs-core, tfjs-layers, tfjs-backend-wasm): `npx memscope demo --backend wasm`;
//   nobackend app (memscope + tfjs-core, tfjs-layers): `npx memscope demo` names the backends to install;
//   bare app (memscope alone): `npx memscope demo` says what to install; `summary`, memscope/torch,
//     memscope/allocator work; memscope/tfjs refuses to track in one line.
// Each check prints PASS or FAIL; the last line is "N passed, M failed"; the exit code is 1 when
// any check failed. MEMSCOPE_PACKAGE_TEST_KEEP=1 keeps the temporary folder for a look inside.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const started = performance.now();
const work = mkdtempSync(join(tmpdir(), 'memscope-package-'));
const fixture = join(root, 'test/fixtures/torch/small_3seg.pickle');

/** The versions the repository's own tests use, so the registry's cache already holds them. */
function installedVersion(name) {
  const file = join(root, 'node_modules', name, 'package.json');
  if (!existsSync(file)) {
    process.stdout.write(`FAIL ${name} is not installed in the repository (run npm ci first)\n0 passed, 1 failed\n`);
    process.exit(1);
  }
  return JSON.parse(readFileSync(file, 'utf8')).version;
}
const tfjsVersion = installedVersion('@tensorflow/tfjs-core');
const typescriptVersion = installedVersion('typescript');

/**
 * The environment of every command: npm's own run-script variables are left out, so the npm
 * inside a temporary app reads its settings as a user's npm would; the compile cache goes into
 * the temporary folder.
 */
const KEPT_NPM_SETTINGS = new Set(['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig']);
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) || KEPT_NPM_SETTINGS.has(k.toLowerCase())));
Object.assign(baseEnv, {
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
  XDG_CACHE_HOME: join(work, 'cache'),
});

let passed = 0;
let failed = 0;

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

function excerpt(text, lines = 12) {
  const all = text.trimEnd().split('\n');
  const shown = all.slice(0, lines).map((l) => `      | ${l}`);
  if (all.length > lines) shown.push(`      | … (${all.length - lines} more lines)`);
  return shown.join('\n');
}

/** Runs a command to completion; never throws. */
function run(command, args, { cwd = work, env = baseEnv, timeout = 240_000 } = {}) {
  const t0 = performance.now();
  const r = spawnSync(command, args, { cwd, env, timeout, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return {
    status: r.status,
    stdout: r.stdout ?? '',
    stderr: r.stderr ?? '',
    ms: performance.now() - t0,
    problem: r.error ? `${r.error.code === 'ETIMEDOUT' ? `timed out after ${seconds(timeout)}` : r.error.message}` : null,
  };
}

/** `run` without waiting: downloads and installs overlap. Resolves with the same shape; never rejects. */
function runAsync(command, args, { cwd = work, env = baseEnv, timeout = 240_000 } = {}) {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeout);
    const done = (status, problem) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, ms: performance.now() - t0, problem: timedOut ? `timed out after ${seconds(timeout)}` : problem });
    };
    child.on('error', (err) => done(null, err.message));
    child.on('close', (status) => done(status, null));
  });
}

/** Records one check: `problems` empty means it passed. */
function report(name, problems, result) {
  const took = result ? ` (${seconds(result.ms)})` : '';
  if (problems.length === 0) {
    passed++;
    process.stdout.write(`PASS ${name}${took}\n`);
    return true;
  }
  failed++;
  process.stdout.write(`FAIL ${name}${took}: ${problems.join('; ')}\n`);
  if (result?.stdout.trim()) process.stdout.write(`    stdout:\n${excerpt(result.stdout)}\n`);
  if (result?.stderr.trim()) process.stdout.write(`    stderr:\n${excerpt(result.stderr)}\n`);
  return false;
}

/**
 * What a finished command must show. `status`: its exit code; `stdout`: patterns its output
 * matches; `errorLine`: the one line its stderr holds (a refusal, not a stack); `stderr`:
 * patterns stderr matches; `quiet`: stderr is empty (no TFJS banner, no warning).
 */
function expectations(result, { status = 0, stdout = [], errorLine, stderr = [], quiet = false }) {
  if (result.problem) return [result.problem];
  const problems = [];
  if (result.status !== status) problems.push(`exit code ${result.status}, expected ${status}`);
  for (const pattern of stdout) if (!pattern.test(result.stdout)) problems.push(`stdout does not match ${pattern}`);
  for (const pattern of stderr) if (!pattern.test(result.stderr)) problems.push(`stderr does not match ${pattern}`);
  if (quiet && result.stderr.trim() !== '') problems.push('stderr is not empty');
  if (errorLine) {
    const lines = result.stderr.trimEnd().split('\n');
    if (lines.length !== 1) problems.push(`stderr has ${lines.length} lines, expected one`);
    if (!errorLine.test(lines[0] ?? '')) problems.push(`stderr's line does not match ${errorLine}`);
  }
  return problems;
}

function check(name, command, args, expected, options) {
  const result = run(command, args, options);
  const problems = expectations(result, expected);
  // A refusal that passed is shown, so the log says what a user reads.
  const shown = expected.errorLine && problems.length === 0 ? `${name}: ${result.stderr.trim()}` : name;
  return report(shown, problems, result);
}

// --- Other Node majors from the registry (downloads start now, beside the pack and installs) ---

/** The other supported Node majors; each check below runs under this machine's Node and each of them. */
const OTHER_NODE_MAJORS = [22, 24];

/** Starts fetching the node-linux-<arch>@<major> registry package into its own folder. */
function downloadNode(major) {
  const dir = join(work, `node${major}`);
  mkdirSync(dir);
  const pkg = `node-linux-${process.arch}@${major}`;
  const download =
    process.platform === 'linux'
      ? runAsync('npm', ['pack', pkg, '--pack-destination', dir, '--loglevel=warn'], { cwd: dir, timeout: 300_000 })
      : Promise.resolve(null);
  return { major, dir, pkg, download };
}

/** `package/bin` of a downloaded Node, unpacked; null (and a FAIL) when it cannot be had. */
async function unpackNode({ major, dir, pkg, download }) {
  const result = await download;
  const problems = [];
  if (result === null) {
    problems.push(`the Node ${major} checks use the ${pkg} registry package, which runs on Linux only (this is ${process.platform})`);
  } else {
    problems.push(...expectations(result, {}));
    const name = readdirSync(dir).find((f) => f.endsWith('.tgz'));
    if (problems.length === 0 && !name) problems.push('npm pack wrote no tarball');
    if (problems.length === 0) {
      problems.push(...expectations(run('tar', ['xzf', name, 'package/bin/node'], { cwd: dir }), {}));
      const version = run(join(dir, 'package/bin/node'), ['--version']);
      if (!version.stdout.startsWith(`v${major}.`)) problems.push(`package/bin/node --version says ${JSON.stringify(version.stdout.trim() || version.stderr.trim())}`);
    }
  }
  return report(`Node ${major} from the npm registry (${pkg})`, problems, result) ? join(dir, 'package/bin') : null;
}

const nodeDownloads = OTHER_NODE_MAJORS.map(downloadNode);

// --- The tarball -------------------------------------------------------------------------------

/**
 * An unbuilt copy of the working tree (the files git tracks or would track, no dist/), with the
 * repository's node_modules linked in: `npm pack` there shows that prepack builds what a clean
 * clone ships, and leaves the repository's own dist/ alone.
 */
function unbuiltCopy() {
  const listing = run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root });
  if (listing.status !== 0) return { problem: `git ls-files failed in ${root}: ${listing.problem ?? listing.stderr.trim()}` };
  const copy = join(work, 'source');
  for (const file of listing.stdout.split('\0').filter(Boolean)) {
    if (!existsSync(join(root, file))) continue; // deleted, not yet committed
    mkdirSync(dirname(join(copy, file)), { recursive: true });
    copyFileSync(join(root, file), join(copy, file));
  }
  symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'), 'dir');
  return { copy };
}

let tarball = null;
const source = unbuiltCopy();
if (source.problem) {
  report('npm pack of an unbuilt copy builds dist and ships it', [source.problem], null);
} else {
  const result = run('npm', ['pack', '--pack-destination', work], { cwd: source.copy, timeout: 600_000 });
  const problems = expectations(result, {});
  const name = readdirSync(work).find((f) => /^memscope-.*\.tgz$/.test(f));
  if (!name) problems.push('no memscope-*.tgz written');
  let detail = '';
  if (name && problems.length === 0) {
    const listing = run('tar', ['tzf', join(work, name)]);
    const files = listing.stdout.split('\n').filter(Boolean);
    for (const needed of ['package/dist/cli/memscope.cjs', 'package/dist/cli/memscope-cli.cjs', 'package/dist/index.js', 'package/dist/tfjs/index.d.ts', 'package/esm-only.cjs']) {
      if (!files.includes(needed)) problems.push(`${needed} is not in the tarball`);
    }
    const stray = files.filter((f) => /^package\/(src|test|bench|scripts|node_modules)\//.test(f));
    if (stray.length > 0) problems.push(`the tarball ships ${stray.length} files it should not (${stray[0]}, …)`);
    // Only the user pages of docs/, each named in package.json's "files" (docs/ARCHITECTURE.md, "Documentation").
    const named = new Set(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).files);
    const docs = files.filter((f) => f.startsWith('package/docs/'));
    const developerDocs = docs.filter((f) => !named.has(f.slice('package/'.length)));
    if (developerDocs.length > 0) problems.push(`the tarball ships developer docs (${developerDocs.join(', ')})`);
    if (!docs.includes('package/docs/COMMANDS.md')) problems.push('package/docs/COMMANDS.md (a user page) is not in the tarball');
    detail = `: ${name}, ${files.length} files`;
  }
  // A tarball that lacks a file still goes on to the apps: each check then shows what that costs.
  if (name && result.status === 0) tarball = join(work, name);
  report(`npm pack of an unbuilt copy builds dist and ships it${detail}`, problems, result);
}

// --- The apps ----------------------------------------------------------------------------------

const APPS = {
  union: [`@tensorflow/tfjs@${tfjsVersion}`, `typescript@${typescriptVersion}`],
  parts: [`@tensorflow/tfjs-core@${tfjsVersion}`, `@tensorflow/tfjs-layers@${tfjsVersion}`, `@tensorflow/tfjs-backend-wasm@${tfjsVersion}`],
  nobackend: [`@tensorflow/tfjs-core@${tfjsVersion}`, `@tensorflow/tfjs-layers@${tfjsVersion}`],
  bare: [],
};
const installed = {};
const installs = Object.entries(APPS).map(([app, packages]) => {
  const dir = join(work, app);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `memscope-${app}-app`, version: '1.0.0', private: true }, null, 2));
  const args = ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, ...packages];
  return { app, dir, packages, result: tarball === null ? null : runAsync('npm', args, { cwd: dir, timeout: 600_000 }) };
});
for (const { app, dir, packages, result: pending } of installs) {
  if (pending === null) {
    report(`install memscope into the ${app} app`, ['not run: there is no tarball'], null);
    continue;
  }
  const result = await pending;
  const label = packages.length > 0 ? `with ${packages.map((p) => p.replace(/@[^@]+$/, '')).join(', ')}` : 'alone';
  if (report(`install memscope ${label} (${app} app)`, expectations(result, {}), result)) installed[app] = dir;
}
if (installed.union) {
  for (const file of ['test/package/api-check.mjs', 'test/package/require-check.cjs', 'test/package/tsconfig.json', 'examples/typed-usage.ts']) {
    copyFileSync(join(root, file), join(installed.union, file.split('/').pop()));
  }
}
if (installed.bare) copyFileSync(join(root, 'test/package/no-tfjs-check.mjs'), join(installed.bare, 'no-tfjs-check.mjs'));

const nodeBins = [dirname(process.execPath)];
for (const download of nodeDownloads) {
  const bin = await unpackNode(download);
  if (bin !== null) nodeBins.push(bin);
}

// --- The checks, under each Node ---------------------------------------------------------------

for (const bin of nodeBins) {
  const env = { ...baseEnv, PATH: `${bin}${delimiter}${baseEnv.PATH ?? ''}` };
  const version = run('node', ['--version'], { env }).stdout.trim();
  const at = (app) => ({ cwd: installed[app], env });
  const tag = `[node ${version}]`;
  const checks = {
    union: () => {
      check(`${tag} npx memscope demo runs on the cpu backend @tensorflow/tfjs brings`, 'npx', ['memscope', 'demo', '--steps', '2', '--batch-size', '4'], {
        stdout: [/2 step\(s\) on the cpu backend; loss \d/, /Peak memory/, /Module: +demo\.bn/],
        quiet: true,
      }, at('union'));
      check(`${tag} npx memscope demo --backend wasm without the wasm backend: one line naming the package`, 'npx', ['memscope', 'demo', '--backend', 'wasm'], {
        status: 1,
        errorLine: /^memscope: the 'wasm' backend is not installed: npm install @tensorflow\/tfjs-backend-wasm$/,
      }, at('union'));
      if (installed.bare) {
        // A memscope installed elsewhere (as a global install is) run in a project that has TFJS.
        check(`${tag} a memscope from another folder, run where TFJS is installed: one line saying so`, 'node', [join(installed.bare, 'node_modules/memscope/dist/cli/memscope.cjs'), 'demo'], {
          status: 1,
          errorLine: /^memscope: TensorFlow\.js is installed in this folder but not where memscope runs from \(.*\): npm install memscope in this project/,
        }, at('union'));
      }
      check(`${tag} npx memscope summary on a PyTorch snapshot`, 'npx', ['memscope', 'summary', fixture], { stdout: [/^CUDA memory snapshot: 3 segments, 76 blocks/] }, at('union'));
      check(`${tag} an ES module using MemTracker (memscope/tfjs), readSnapshot (memscope/torch), DeviceMemory`, 'node', ['api-check.mjs', fixture], {
        stdout: [/ok MemTracker counts the Dense\(4→2\) weights as 40 B of Parameter/, /ok readSnapshot/, /ok DeviceMemory/],
      }, at('union'));
      check(`${tag} require() of every entry throws "memscope is ESM-only …"`, 'node', ['require-check.cjs'], { stdout: [/ok require\('memscope\/node'\)/] }, at('union'));
      check(`${tag} node -e "require('memscope')" fails with the ESM-only message`, 'node', ['-e', "require('memscope')"], {
        status: 1,
        stderr: [/^Error: memscope is ESM-only: load it with import\(\)/m],
      }, at('union'));
      check(`${tag} tsc --noEmit on examples/typed-usage.ts against memscope's declarations`, 'npx', ['tsc', '-p', 'tsconfig.json'], {}, at('union'));
    },
    parts: () => {
      check(`${tag} npx memscope demo --backend wasm with tfjs-core, tfjs-layers and tfjs-backend-wasm`, 'npx', ['memscope', 'demo', '--backend', 'wasm', '--steps', '2', '--batch-size', '4'], {
        stdout: [/2 step\(s\) on the wasm backend; loss \d/, /Peak memory/],
        quiet: true,
      }, at('parts'));
    },
    nobackend: () => {
      check(`${tag} npx memscope demo with tfjs-core and tfjs-layers but no backend: one line naming the backends`, 'npx', ['memscope', 'demo'], {
        status: 1,
        errorLine: /^memscope: no TensorFlow\.js backend that runs in Node is installed: npm install @tensorflow\/tfjs-backend-cpu /,
      }, at('nobackend'));
    },
    bare: () => {
      check(`${tag} npx memscope demo without TFJS: one line naming what to install`, 'npx', ['memscope', 'demo'], {
        status: 1,
        errorLine: /^memscope: TensorFlow\.js is not installed, .*: npm install @tensorflow\/tfjs /,
      }, at('bare'));
      check(`${tag} npx memscope summary without TFJS`, 'npx', ['memscope', 'summary', fixture], { stdout: [/^CUDA memory snapshot: 3 segments, 76 blocks/] }, at('bare'));
      check(`${tag} every entry without TFJS; memscope/tfjs refuses to track in one line`, 'node', ['no-tfjs-check.mjs', fixture], {
        stdout: [/ok memscope\/node loads/, /ok readSnapshot/, /ok DeviceMemory/, /ok MemTracker \(memscope\/tfjs\) without TFJS refuses in one line/],
      }, at('bare'));
    },
  };
  for (const [app, run] of Object.entries(checks)) {
    if (installed[app]) run();
    else report(`${tag} the ${app} app's checks`, [`not run: memscope did not install into the ${app} app`], null);
  }
}

if (process.env['MEMSCOPE_PACKAGE_TEST_KEEP'] === '1') process.stdout.write(`kept ${work}\n`);
else rmSync(work, { recursive: true, force: true });
process.stdout.write(`packaging test: ${seconds(performance.now() - started)}\n`);
process.stdout.write(`${passed} passed, ${failed} failed\n`);
process.exitCode = failed > 0 ? 1 : 0;

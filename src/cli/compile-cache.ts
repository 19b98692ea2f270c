// Saves 8 % of the CPU of `memscope summary small_3seg.pickle --json` (35 % of its instructions): paired runs against MEMSCOPE_COMPILE_CACHE=off.
/**
 * Runs a CommonJS file with a V8 code cache: the bytecode V8 compiled on an earlier run, for the
 * functions that run actually called, is read back instead of parsing and compiling the source
 * again. Node 20 has no compile cache of its own (`module.enableCompileCache` came in Node 22),
 * and ES modules cannot take one from user code, so the `memscope` bin runs its bundle as
 * CommonJS through `vm.Script` (src/cli/bin.ts). Measured in docs/COMMANDS.md ("Start-up").
 *
 * Safe by construction: V8 checks a cache against its own version, flags and the source's length
 * and rejects a mismatch (`cachedDataRejected`), and the file name memscope looks up carries the
 * source's size and modification time besides Node's version and architecture, so an edited or
 * rebuilt file never meets an old cache. Nothing here may fail the program: an unreadable,
 * rejected or unwritable cache only means compiling as usual. A cache is written, at exit, only
 * when there was none to use, so it holds the functions of a whole run.
 */
import { accessSync, closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { Script } from 'node:vm';

/** What became of the cache: used, none there yet, there but rejected by V8, or switched off. */
export type CompileCacheStatus = 'hit' | 'miss' | 'rejected' | 'off';

export interface CompiledModule {
  readonly exports: unknown;
  readonly cache: CompileCacheStatus;
  /** The cache file looked up (null when off). */
  readonly cacheFile: string | null;
}

export interface RunWithCompileCacheOptions {
  /** Directory of the cache files; null runs without a cache. */
  readonly cacheDir: string | null;
  /**
   * Separates caches of one file by what the run does (the bin: the verb), so each holds the
   * functions its kind of run compiles. Letters, digits and dashes.
   */
  readonly variant?: string;
}

/**
 * The directory `memscope` keeps its compile caches in: `MEMSCOPE_COMPILE_CACHE` when it names
 * one, none when it is `0` or `off`, else `$XDG_CACHE_HOME/memscope` or `~/.cache/memscope`.
 * A per-user directory, never a shared temporary one: a cache file is code this process runs.
 */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env): string | null {
  const setting = env['MEMSCOPE_COMPILE_CACHE'];
  if (setting === '0' || setting === 'off') return null;
  if (setting) return setting;
  const base = env['XDG_CACHE_HOME'] || join(homedir(), '.cache');
  return join(base, 'memscope', 'compile-cache');
}

/** FNV-1a of a string: tells apart cache files of the same bundle installed in several places. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(36);
}

/** Runs the CommonJS file at `file` (absolute) and returns its exports, with a code cache when it can. */
export function runWithCompileCache(file: string, options: RunWithCompileCacheOptions): CompiledModule {
  // The source and the size and time that name its cache come from one open file, so a bundle
  // replaced while this runs cannot pair the new name with the old bytecode.
  const fd = openSync(file, 'r');
  let source: string;
  let size: number;
  let mtimeMs: number;
  try {
    ({ size, mtimeMs } = fstatSync(fd));
    source = readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
  const variant = options.variant !== undefined && /^[a-z0-9-]{1,32}$/i.test(options.variant) ? options.variant : 'default';
  let cacheFile: string | null = null;
  let prefix = '';
  let cachedData: Buffer | undefined;
  if (options.cacheDir !== null) {
    try {
      prefix = `${basename(file)}.${fnv1a(file)}.${variant}.`;
      cacheFile = join(options.cacheDir, `${prefix}${size}-${Math.trunc(mtimeMs)}.${process.version}-${process.arch}.v8cache`);
      cachedData = readFileSync(cacheFile);
    } catch {
      cachedData = undefined; // no cache yet, or the directory cannot be read: compile as usual
    }
  }
  // The function wrapper Node gives every CommonJS module, on the source's first line so that
  // stack traces keep their line numbers.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: file, cachedData });
  const cache: CompileCacheStatus = cacheFile === null ? 'off' : cachedData === undefined ? 'miss' : script.cachedDataRejected ? 'rejected' : 'hit';
  if (cacheFile !== null && cache !== 'hit') writeCacheAtExit(script, options.cacheDir!, cacheFile, prefix);
  const module = { exports: {} as unknown };
  const wrapper = script.runInThisContext() as (e: unknown, r: NodeJS.Require, m: typeof module, f: string, d: string) => void;
  wrapper.call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  return { exports: module.exports, cache, cacheFile };
}

/**
 * Makes `dir` and the parents it lacks, one level at a time. Not `mkdirSync(…, { recursive })`:
 * Node's spins for ever where a parent exists but refuses a child (a cache directory set under
 * /proc), which would hang the command after its output.
 */
function makeDirectory(dir: string): void {
  try {
    mkdirSync(dir, { mode: 0o700 });
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir || existsSync(parent)) throw err;
  }
  makeDirectory(dirname(dir));
  mkdirSync(dir, { mode: 0o700 });
}

function writeCacheAtExit(script: Script, dir: string, cacheFile: string, prefix: string): void {
  process.once('exit', () => {
    try {
      // Where the directory cannot be made or written to, skip serialising (~2.5 ms for the CLI's
      // bundle) rather than pay it on every run for a file that cannot be kept.
      makeDirectory(dir);
      accessSync(dir, constants.W_OK);
      const data = script.createCachedData();
      // Written whole, then renamed: a concurrent run reads either no file or a complete one.
      const partial = `${cacheFile}.${process.pid}.partial`;
      writeFileSync(partial, data, { mode: 0o600 });
      renameSync(partial, cacheFile);
      // Caches of earlier builds of this file, for this variant, are dead weight now.
      const current = basename(cacheFile);
      for (const name of readdirSync(dir)) {
        if (name.startsWith(prefix) && name !== current && !name.endsWith('.partial')) unlinkSync(join(dir, name));
      }
    } catch {
      // A cache that cannot be written costs the next run its compile time, nothing else.
    }
  });
}

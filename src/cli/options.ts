/**
 * Option values for every verb, read one way: a bad value is a usage error (exit 2, one line
 * naming the option and the value), never a silent default. Each reader works as a commander
 * argument parser too: `.option('--top <n>', 'rows', (v) => nonNegativeInt(v, '--top'), 10)`.
 */
import { Option } from 'commander';
import { MemscopeError, isMemscopeError } from '../core/errors.js';
import { siteRule, type SiteRule } from '../core/site-rule.js';
import { deviceLabel } from '../torch/device-type.js';

/**
 * An option whose default, a number or word read by the verb itself, shows in help as written
 * (`(default: 8)`), where commander would quote a string default (`(default: "8")`).
 */
export function optionWithDefault(flags: string, description: string, value: string): Option {
  return new Option(flags, description).default(value, value);
}

/** The MemscopeError code of a usage error; src/cli/cli.ts maps it to exit code 2. */
export const USAGE_ERROR = 'usage';

export function usageError(message: string): MemscopeError {
  return new MemscopeError(USAGE_ERROR, message);
}

export function isUsageError(err: unknown): boolean {
  return isMemscopeError(err) && err.code === USAGE_ERROR;
}

/** An integer ≥ 0 written in decimal digits ('0', '12'); '-3', '1.5', '1e3' and 'abc' are refused. */
export function nonNegativeInt(value: string, flag: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n)) throw usageError(`${flag} must be a non-negative integer, got ${JSON.stringify(value)}`);
  return n;
}

/** `--device`: an index (`1`) or a device label (`cuda:1`, `webgpu:0`), as the index. */
export function deviceIndex(value: string, flag = '--device'): number {
  const labelled = /^\s*[a-z][a-z0-9_]*:(\d+)\s*$/.exec(value);
  return labelled ? nonNegativeInt(labelled[1]!, flag) : nonNegativeInt(value, flag);
}

/** A snapshot verb's `--device` naming a device the file has no segment on: usage, naming the ones it has. */
export function requireSnapshotDevice(snapshot: { segments: readonly { device: number }[]; deviceType: string }, device: number | null, file: string): void {
  if (device === null) return;
  const devices = [...new Set(snapshot.segments.map((s) => s.device))].sort((a, b) => a - b);
  if (devices.includes(device)) return;
  const has = devices.map((d) => deviceLabel(snapshot.deviceType, d)).join(', ');
  throw usageError(`--device ${device}: ${file} has ${has ? `segments on ${has} only` : 'no segments'}`);
}

/** An integer ≥ 1. */
export function positiveInt(value: string, flag: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw usageError(`${flag} must be a positive integer, got ${JSON.stringify(value)}`);
  return n;
}

/** Binary multiples, as PyTorch and `nvidia-smi` report memory: K = KB = KiB = 1024. */
const BYTE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tb: 1024 ** 4,
  tib: 1024 ** 4,
};

/**
 * A positive size in bytes: '24GiB', '512MiB', '1.5 GiB', '16G', or plain bytes ('17179869184').
 * Units are binary whatever their spelling (case-insensitive); the result is rounded down to a byte.
 */
export function byteSize(value: string, flag: string): number {
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
  const multiple = m ? BYTE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || multiple === undefined) {
    throw usageError(`${flag} must be a size in bytes such as 24GiB, 512MiB or 17179869184, got ${JSON.stringify(value)}`);
  }
  const bytes = Math.floor(Number(m[1]) * multiple);
  if (!(bytes > 0 && Number.isSafeInteger(bytes))) throw usageError(`${flag} must be a positive size, got ${JSON.stringify(value)}`);
  return bytes;
}

/**
 * Runs a reader of an option value that throws MemscopeError (parseAllocatorConf, a backend
 * name's parser) and turns what it throws into a usage error with the same message.
 */
export function usageOf<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (isMemscopeError(err) && err.code !== USAGE_ERROR) throw usageError(err.message);
    throw err;
  }
}

/** One of `choices`, spelled exactly. */
export function choice<T extends string>(value: string, flag: string, choices: readonly T[]): T {
  if ((choices as readonly string[]).includes(value)) return value as T;
  throw usageError(`${flag} must be one of ${choices.join(', ')}, got ${JSON.stringify(value)}`);
}

/** `--site-skip REGEX`, repeatable: more frames that count as framework when choosing an allocation's site. */
export const SITE_SKIP_HELP = 'frames matching this regular expression count as framework when choosing an allocation\u2019s site (repeatable; PyTorch\u2019s and TFJS\u2019s own frames always do)';

/** Collects `--site-skip` values, each checked to compile as it is read. */
export function siteSkipOption(value: string, previous: string[] = []): string[] {
  siteRule([value], '--site-skip');
  return [...previous, value];
}

/** The site rule of a verb's `--site-skip` values. */
export function siteRuleOption(skip: readonly string[] | undefined): SiteRule {
  return siteRule(skip ?? [], '--site-skip');
}

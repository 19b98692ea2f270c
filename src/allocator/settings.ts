import { MemscopeError } from '../core/errors.js';
import { isPowerOfTwo, LARGE_BUFFER, log2Floor, POWER2_INTERVALS, power2IntervalIndex } from './sizes.js';

const MiB = 1 << 20;

/** The allocator knobs of PYTORCH_CUDA_ALLOC_CONF that change where memory goes. */
export interface AllocatorSettings {
  /** The string the settings were parsed from ('' for defaults). */
  readonly conf: string;
  /** Blocks at least this big are never split ("oversize"); Infinity = unlimited (PyTorch's default). */
  readonly maxSplitSize: number;
  /** How much an oversize request may be over-served by a cached block without splitting. */
  readonly maxNonSplitRoundingSize: number;
  /** One division count per power-of-two interval, 1 MiB … 32 GiB (0 or 1 = plain 512-byte rounding). */
  readonly roundupPower2Divisions: readonly number[];
  /** Fraction of the allowed memory above which cached blocks are reclaimed before cudaMalloc; 0 = off. */
  readonly garbageCollectionThreshold: number;
  readonly expandableSegments: boolean;
  readonly releaseLockOnCudaMalloc: boolean;
  readonly pinnedUseCudaHostRegister: boolean;
  readonly pinnedNumRegisterThreads: number;
  /** `backend:` — which allocator PyTorch uses (absent = 'native'). */
  readonly backend?: 'native' | 'cudaMallocAsync';
}

export const DEFAULT_SETTINGS: AllocatorSettings = Object.freeze({
  conf: '',
  maxSplitSize: Infinity,
  maxNonSplitRoundingSize: LARGE_BUFFER,
  roundupPower2Divisions: Object.freeze(new Array<number>(POWER2_INTERVALS).fill(0)),
  garbageCollectionThreshold: 0,
  expandableSegments: false,
  releaseLockOnCudaMalloc: false,
  pinnedUseCudaHostRegister: false,
  pinnedNumRegisterThreads: 1,
});

function bad(conf: string, message: string): MemscopeError {
  return new MemscopeError('bad-alloc-conf', `allocator settings ${JSON.stringify(conf)}: ${message}`);
}

/** Splits at top-level commas (commas inside [...] belong to a list value). */
function splitOptions(conf: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < conf.length; i++) {
    const c = conf[i];
    if (c === '[') depth++;
    else if (c === ']') {
      depth--;
      if (depth < 0) throw bad(conf, `unbalanced ']' at character ${i}`);
    } else if (c === ',' && depth === 0) {
      out.push(conf.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) throw bad(conf, "unbalanced '[': a list value is not closed");
  out.push(conf.slice(start));
  return out.map((s) => s.trim()).filter((s) => s.length > 0);
}

function parseNumber(conf: string, key: string, text: string): number {
  const t = text.trim();
  if (!/^[0-9]+(\.[0-9]*)?$|^\.[0-9]+$/.test(t)) throw bad(conf, `${key} expects a number, got ${JSON.stringify(text)}`);
  return Number(t);
}

function parseInteger(conf: string, key: string, text: string): number {
  const t = text.trim();
  if (!/^[0-9]+$/.test(t)) throw bad(conf, `${key} expects a non-negative integer, got ${JSON.stringify(text)}`);
  return Number(t);
}

function parseBool(conf: string, key: string, text: string): boolean {
  const t = text.trim();
  if (t === 'True' || t === 'true') return true;
  if (t === 'False' || t === 'false') return false;
  throw bad(conf, `${key} expects True or False, got ${JSON.stringify(text)}`);
}

function parseDivisions(conf: string, text: string): number[] {
  const divisions = new Array<number>(POWER2_INTERVALS).fill(0);
  const t = text.trim();
  if (!t.startsWith('[')) {
    const n = parseInteger(conf, 'roundup_power2_divisions', t);
    if (!isPowerOfTwo(n)) throw bad(conf, `roundup_power2_divisions must be a power of 2, got ${n}`);
    return divisions.fill(n);
  }
  if (!t.endsWith(']')) throw bad(conf, 'roundup_power2_divisions list must end with ]');
  const body = t.slice(1, -1).trim();
  if (body === '') throw bad(conf, 'roundup_power2_divisions list is empty');
  let lastIndex = 0;
  let first = true;
  for (const entry of body.split(',')) {
    const parts = entry.split(':');
    if (parts.length !== 2) throw bad(conf, `roundup_power2_divisions entry ${JSON.stringify(entry)} is not SIZE_MB:DIVISIONS`);
    const key = parts[0].trim();
    const n = parseInteger(conf, 'roundup_power2_divisions', parts[1]);
    if (!isPowerOfTwo(n)) throw bad(conf, `roundup_power2_divisions: divisions must be a power of 2, got ${n}`);
    if (key === '>') {
      // PyTorch fills from the last named interval (inclusive) to the end.
      divisions.fill(n, lastIndex);
    } else {
      const mb = parseInteger(conf, 'roundup_power2_divisions', key);
      if (!isPowerOfTwo(mb)) throw bad(conf, `roundup_power2_divisions: interval ${mb} MB is not a power of 2`);
      const index = Math.min(log2Floor(mb), POWER2_INTERVALS - 1);
      // The first named interval also covers every smaller one.
      if (first) divisions.fill(n, 0, index);
      divisions[index] = n;
      lastIndex = index;
    }
    first = false;
  }
  return divisions;
}

/**
 * Parses PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax, e.g.
 * `max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4],expandable_segments:True`.
 * Unknown options and out-of-range values throw MemscopeError('bad-alloc-conf').
 */
export function parseAllocatorConf(conf: string): AllocatorSettings {
  if (typeof conf !== 'string') throw new MemscopeError('bad-alloc-conf', 'allocator settings must be a string');
  let s: {
    -readonly [K in keyof AllocatorSettings]: AllocatorSettings[K];
  } = { ...DEFAULT_SETTINGS, roundupPower2Divisions: [...DEFAULT_SETTINGS.roundupPower2Divisions], conf };
  const seen = new Set<string>();
  for (const option of splitOptions(conf)) {
    const colon = option.indexOf(':');
    if (colon < 0) throw bad(conf, `option ${JSON.stringify(option)} has no ':VALUE'`);
    const key = option.slice(0, colon).trim();
    const value = option.slice(colon + 1);
    if (seen.has(key)) throw bad(conf, `option ${key} given twice`);
    seen.add(key);
    switch (key) {
      case 'max_split_size_mb': {
        const mb = parseNumber(conf, key, value);
        const minMb = LARGE_BUFFER / MiB;
        if (!(mb > minMb)) throw bad(conf, `max_split_size_mb too small, must be > ${minMb}`);
        s.maxSplitSize = Math.floor(mb) * MiB;
        break;
      }
      case 'max_non_split_rounding_mb': {
        const mb = parseNumber(conf, key, value);
        const minMb = LARGE_BUFFER / MiB;
        if (!(mb > minMb)) throw bad(conf, `max_non_split_rounding_mb too small, must be > ${minMb}`);
        s.maxNonSplitRoundingSize = Math.floor(mb) * MiB;
        break;
      }
      case 'garbage_collection_threshold': {
        const v = parseNumber(conf, key, value);
        if (v <= 0) throw bad(conf, 'garbage_collection_threshold too small, set it 0.0~1.0');
        if (v >= 1) throw bad(conf, 'garbage_collection_threshold too big, set it 0.0~1.0');
        s.garbageCollectionThreshold = v;
        break;
      }
      case 'roundup_power2_divisions':
        s.roundupPower2Divisions = parseDivisions(conf, value);
        break;
      case 'expandable_segments':
        s.expandableSegments = parseBool(conf, key, value);
        break;
      case 'release_lock_on_cudamalloc':
        s.releaseLockOnCudaMalloc = parseBool(conf, key, value);
        break;
      case 'pinned_use_cuda_host_register':
        s.pinnedUseCudaHostRegister = parseBool(conf, key, value);
        break;
      case 'pinned_num_register_threads': {
        const n = parseInteger(conf, key, value);
        if (!isPowerOfTwo(n) || n > 128) throw bad(conf, 'pinned_num_register_threads must be a power of 2 between 1 and 128');
        s.pinnedNumRegisterThreads = n;
        break;
      }
      case 'backend': {
        const v = value.trim();
        if (v === 'native' || v === 'cudaMallocAsync') {
          s.backend = v;
          break;
        }
        throw bad(conf, `backend must be native or cudaMallocAsync, got ${JSON.stringify(v)}`);
      }
      default:
        throw bad(conf, `unrecognized option ${JSON.stringify(key)} (known: max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold, expandable_segments, release_lock_on_cudamalloc, pinned_use_cuda_host_register, pinned_num_register_threads, backend)`);
    }
  }
  s = { ...s, roundupPower2Divisions: Object.freeze(s.roundupPower2Divisions) };
  return Object.freeze(s);
}

/** The divisions that apply to a request of `size` bytes. */
export function divisionsFor(settings: AllocatorSettings, size: number): number {
  return settings.roundupPower2Divisions[power2IntervalIndex(size)] ?? 0;
}

/** The `allocator_settings` dict of a PyTorch snapshot. */
export interface SnapshotAllocatorSettings {
  PYTORCH_CUDA_ALLOC_CONF: string;
  max_split_size: number;
  garbage_collection_threshold: number;
  expandable_segments: boolean;
  pinned_num_register_threads: number;
  release_lock_on_cudamalloc: boolean;
  pinned_use_cuda_host_register: boolean;
  roundup_power2_divisions: Record<string, number>;
}

export function toSnapshotSettings(s: AllocatorSettings): SnapshotAllocatorSettings {
  const divisions: Record<string, number> = {};
  s.roundupPower2Divisions.forEach((d, i) => {
    divisions[String(2 ** i)] = d;
  });
  return {
    PYTORCH_CUDA_ALLOC_CONF: s.conf,
    max_split_size: s.maxSplitSize === Infinity ? -1 : s.maxSplitSize,
    garbage_collection_threshold: s.garbageCollectionThreshold,
    expandable_segments: s.expandableSegments,
    pinned_num_register_threads: s.pinnedNumRegisterThreads,
    release_lock_on_cudamalloc: s.releaseLockOnCudaMalloc,
    pinned_use_cuda_host_register: s.pinnedUseCudaHostRegister,
    roundup_power2_divisions: divisions,
  };
}

/**
 * Settings recorded in a snapshot's `allocator_settings` (absent in older
 * files: then PyTorch's defaults, which is what those runs used unless they set
 * PYTORCH_CUDA_ALLOC_CONF — memscope cannot know).
 */
export function settingsFromSnapshot(raw: unknown, where = 'allocator_settings'): AllocatorSettings {
  if (raw === undefined || raw === null) return DEFAULT_SETTINGS;
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new MemscopeError('bad-snapshot', `${where}: expected a dict`);
  }
  const r = raw as Record<string, unknown>;
  const num = (key: string, dflt: number): number => {
    const v = r[key];
    if (v === undefined) return dflt;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new MemscopeError('bad-snapshot', `${where}.${key}: expected a number`);
    return v;
  };
  const bool = (key: string): boolean => {
    const v = r[key];
    if (v === undefined) return false;
    if (typeof v !== 'boolean') throw new MemscopeError('bad-snapshot', `${where}.${key}: expected a bool`);
    return v;
  };
  const divisions = new Array<number>(POWER2_INTERVALS).fill(0);
  const rawDiv = r.roundup_power2_divisions;
  if (rawDiv !== undefined && rawDiv !== null) {
    if (typeof rawDiv !== 'object' || Array.isArray(rawDiv)) throw new MemscopeError('bad-snapshot', `${where}.roundup_power2_divisions: expected a dict`);
    for (const [k, v] of Object.entries(rawDiv as Record<string, unknown>)) {
      const mb = Number(k);
      if (!isPowerOfTwo(mb) || typeof v !== 'number') throw new MemscopeError('bad-snapshot', `${where}.roundup_power2_divisions[${k}]: expected power-of-two MB key and integer value`);
      divisions[Math.min(log2Floor(mb), POWER2_INTERVALS - 1)] = v;
    }
  }
  const maxSplit = num('max_split_size', -1);
  const conf = typeof r.PYTORCH_CUDA_ALLOC_CONF === 'string' ? r.PYTORCH_CUDA_ALLOC_CONF : '';
  // max_non_split_rounding_mb is not in the dict; the recorded conf string may carry it.
  let maxNonSplitRoundingSize = LARGE_BUFFER;
  try {
    maxNonSplitRoundingSize = parseAllocatorConf(conf).maxNonSplitRoundingSize;
  } catch {
    // A conf string this PyTorch accepted but memscope does not know: the dict's values still apply.
  }
  return Object.freeze({
    conf,
    maxSplitSize: maxSplit < 0 ? Infinity : maxSplit,
    maxNonSplitRoundingSize,
    roundupPower2Divisions: Object.freeze(divisions),
    garbageCollectionThreshold: num('garbage_collection_threshold', 0),
    expandableSegments: bool('expandable_segments'),
    releaseLockOnCudaMalloc: bool('release_lock_on_cudamalloc'),
    pinnedUseCudaHostRegister: bool('pinned_use_cuda_host_register'),
    pinnedNumRegisterThreads: num('pinned_num_register_threads', 1),
  });
}

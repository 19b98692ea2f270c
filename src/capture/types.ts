/**
 * The capture format (docs/CAPTURE_FORMAT.md): what `memscope run` streams to
 * disk and what `memscope report`/`memscope leaks` read back. Framework-free.
 *
 * On disk a capture is NDJSON: one header object, then one JSON array per
 * record whose first element is a one-letter tag. Strings (devices,
 * categories, layer paths, kernel names, stack frames) and stacks are
 * interned: declared once by an `s`/`k` record, then referred to by number.
 * Id 0 is reserved for "none" in both tables.
 */

import { type CategoryIndex, MEM_REF_TYPES, type MemRefType, isOwnedCategory } from '../core/mem-categories.js';

export const CAPTURE_FORMAT = 'memscope-capture';
export const CAPTURE_VERSION = 1;

/** MemTracker's categories (PyTorch's names), in display order: see core/mem-categories.ts. */
export const CATEGORIES = MEM_REF_TYPES;
export type Category = MemRefType;

/** Categories whose storages are owned by a tracked model, optimizer or external tensor. */
export const OWNED_CATEGORIES: ReadonlySet<string> = new Set(MEM_REF_TYPES.filter((_, i) => isOwnedCategory(i as CategoryIndex)));

export interface CaptureHeader {
  format: typeof CAPTURE_FORMAT;
  version: number;
  /** ISO time the capture started. */
  created: string;
  /** The program and its arguments, as given to `memscope run`. */
  argv: string[];
  /** Backend requested with --backend, or null for the program's own choice. */
  backend: string | null;
  /** Whether allocation records carry JS stacks. */
  stacks: boolean;
  /** Alloc/free records written before further ones were dropped; null for no cap. */
  maxEntries: number | null;
  /** Unit of every `t` field. */
  clock: 'ms';
  /**
   * What recorded it: 'run' (`memscope run`; absent in captures that predate the field) or
   * 'browser' (`startCapture` in a page, whose `argv` is the page's address).
   */
  recorder?: 'run' | 'browser';
}

/**
 * How a capture's recorder spells an option, for advice that names it: `memscope run`'s flag, or
 * the page's `startCapture` option.
 */
export function recordingOption(header: Pick<CaptureHeader, 'recorder'>, option: 'stacks' | 'maxEntries'): string {
  if (header.recorder === 'browser') return option === 'stacks' ? 'startCapture({ stacks: true })' : "startCapture's maxEntries";
  return option === 'stacks' ? '--stacks' : '--max-entries';
}

/** The capture's origin in words: the command line it ran, or the page it was taken in. */
export function recordedFrom(header: Pick<CaptureHeader, 'recorder' | 'argv'>): string {
  return header.recorder === 'browser' ? `startCapture in ${header.argv.join(' ')}` : `memscope run ${header.argv.join(' ')}`;
}

/** Record tags. */
export const TAG = {
  string: 's',
  stack: 'k',
  module: 'M',
  alloc: 'a',
  free: 'f',
  category: 'c',
  step: 'p',
  mark: 'm',
  allocStack: 't',
  moduleState: 'S',
  kernel: 'K',
  end: 'e',
} as const;

/** Bytes per device per category: `{ cpu: { Activation: 1024 } }`. */
export type DeviceCategoryBytes = Record<string, Record<string, number>>;

/** A module's latest MemTracker-style state table. */
export interface ModuleStates {
  /** State name ('Pre-Forward', 'Post-Forward', 'Peak-Forward', 'Pre-Backward', ...) → bytes by device and category. */
  states: Record<string, DeviceCategoryBytes>;
  /** Highest total live bytes per device while the module's forward ran. */
  localPeakForward: Record<string, number>;
  /** Same for its backward. */
  localPeakBackward: Record<string, number>;
  /** The module's own trainable / non-trainable bytes. */
  parameterBytes: number;
  bufferBytes: number;
}

export interface CaptureEndInfo {
  /** Alloc/free events the recorder saw (written or not). */
  events: number;
  /** Alloc/free records not written because of --max-entries. */
  dropped: number;
  /** The program's exit code, or null if unknown. */
  exitCode: number | null;
  /** An uncaught error's message, if the program died of one. */
  error: string | null;
}

/**
 * An allocation's *site*: the frame it is charged to, the first frame of its stack (innermost
 * first) outside the allocator and the framework. One rule for every source and every view — the
 * report, `summary`, `leaks`, `compare` — so one allocation names one line everywhere.
 *
 * A frame is internal when it is native code of a Python stack (PyTorch's C++: the caching
 * allocator, ATen, the dispatcher, and CPython's own C) or when one of the rule's patterns matches
 * its text. A frame's text is what the source records: a V8 frame line for TensorFlow.js
 * (`fn (path:line:col)`, or a folded run `[N frames in pkg, …]`), `path:line:function` with the
 * full path for PyTorch. Browser-safe, framework-free.
 */
import { MemscopeError } from './errors.js';

export interface SiteRule {
  /** A frame any of these matches is internal (the allocator's or a framework's). */
  readonly internal: readonly RegExp[];
}

/**
 * PyTorch's own Python: the `torch` package, installed or a source checkout (PyTorch's native
 * frames are internal by their kind, see `isInternalFrame`).
 */
export const PYTORCH_INTERNAL_FRAMES: readonly RegExp[] = [/(^|[\\/])torch[\\/]/];

/**
 * TensorFlow.js under Node: runs of library frames `memscope run` folds into `[N frames in …]`,
 * installed packages, Node's internals, TFJS's sources (`…/tfjs-core/src/engine.ts` under source
 * maps), and the anonymous and promise frames V8 adds around them.
 */
export const TFJS_INTERNAL_FRAMES: readonly RegExp[] = [/^\[/, /node_modules/, /(^|\()node:/, /[\\/]tfjs-[\w-]+[\\/]src[\\/]/, /^new Promise\b/, /\(<anonymous>\)$/, /^<anonymous>$/];

export const DEFAULT_SITE_RULE: SiteRule = { internal: [...PYTORCH_INTERNAL_FRAMES, ...TFJS_INTERNAL_FRAMES] };

/**
 * The default rule plus `skip`: more internal frames, e.g. a library the program calls
 * (`site-packages/transformers/`, `@tensorflow-models`). A string is a regular expression's
 * source; one that does not compile is refused naming `what` (the option that gave it).
 */
export function siteRule(skip: readonly (string | RegExp)[] = [], what = 'site skip pattern'): SiteRule {
  if (skip.length === 0) return DEFAULT_SITE_RULE;
  const extra = skip.map((p) => {
    if (p instanceof RegExp) return p;
    try {
      return new RegExp(p);
    } catch (err) {
      throw new MemscopeError('usage', `${what} ${JSON.stringify(p)} is not a regular expression: ${(err as Error).message}`);
    }
  });
  return { internal: [...DEFAULT_SITE_RULE.internal, ...extra] };
}

/** Whether a frame is internal; `native` marks a C/C++ frame of a Python stack. */
export function isInternalFrame(rule: SiteRule, text: string, native = false): boolean {
  if (native) return true;
  for (const re of rule.internal) if (re.test(text)) return true;
  return false;
}

/** Index of the site in `frames` (innermost first), or −1 when every frame is internal. */
export function siteIndex(rule: SiteRule, frames: readonly string[]): number {
  for (let i = 0; i < frames.length; i++) if (!isInternalFrame(rule, frames[i]!)) return i;
  return -1;
}

/** The site of a stack of frame texts (innermost first), or null when every frame is internal. */
export function siteFrame(rule: SiteRule, frames: readonly string[]): string | null {
  const i = siteIndex(rule, frames);
  return i < 0 ? null : frames[i]!;
}

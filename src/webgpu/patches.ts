/**
 * Replacing methods on the page's WebGPU prototypes and putting the originals back exactly: each
 * patch keeps the property descriptor it replaced (so the restored method is the same function,
 * with the same enumerability and writability), and restoring goes newest first.
 */
import { MemscopeError } from '../core/errors.js';

interface Patch {
  target: object;
  name: string;
  /** The property as it was: own descriptor, or undefined when the method was inherited. */
  previous: PropertyDescriptor | undefined;
}

/** Every wrapper any installation made, so that a second installation on the same prototypes is refused. */
const WRAPPERS = new WeakSet<Function>();

export class PatchSet {
  private readonly patches: Patch[] = [];

  /**
   * Replaces `target[name]` (a method) with `make(original)`. Does nothing when `target` has no
   * such method (an older browser without `createQuerySet`, say).
   */
  replace<F extends Function>(target: object | undefined, name: string, make: (original: F) => F): void {
    if (!target) return;
    const original = (target as Record<string, unknown>)[name];
    if (typeof original !== 'function') return;
    if (WRAPPERS.has(original)) {
      throw new MemscopeError('already-installed', `memscope/webgpu is already installed (${name} is memscope's): uninstall it first`);
    }
    const previous = Object.getOwnPropertyDescriptor(target, name);
    const wrapper = make(original as F);
    WRAPPERS.add(wrapper);
    Object.defineProperty(target, name, {
      value: wrapper,
      writable: previous?.writable ?? true,
      enumerable: previous?.enumerable ?? false,
      configurable: true,
    });
    this.patches.push({ target, name, previous });
  }

  /** Puts every replaced method back, newest first. */
  restore(): void {
    while (this.patches.length > 0) {
      const p = this.patches.pop()!;
      if (p.previous) Object.defineProperty(p.target, p.name, p.previous);
      else delete (p.target as Record<string, unknown>)[p.name];
    }
  }
}

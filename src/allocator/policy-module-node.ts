import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MemscopeError } from '../core/errors.js';
import type { DeviceAllocator } from './allocator-interface.js';
import { BUILTIN_POLICIES, type AllocatorFactory, type PolicyContext } from './policy-replay.js';

/**
 * The allocator `--allocator SPEC` names: 'native', 'cudaMallocAsync', or a
 * path to the user's ES module. The module exports a factory
 * `(context: PolicyContext) => DeviceAllocator` as its default export or as
 * `createAllocator`; a default export that is already an allocator object
 * (with alloc and free) is used as it is, for every run.
 */
export async function loadAllocatorPolicy(spec: string): Promise<AllocatorFactory> {
  if (spec === 'native' || spec === 'cudaMallocAsync') return BUILTIN_POLICIES[spec];
  const path = resolve(spec);
  if (!existsSync(path)) {
    throw new MemscopeError('bad-argument', `--allocator ${spec}: not native, cudaMallocAsync, or an existing .mjs/.js file`);
  }
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (err) {
    const text = (err instanceof Error ? err.message : String(err)).split('\n')[0];
    throw new MemscopeError('bad-argument', `--allocator ${spec}: the module failed to load: ${text}`);
  }
  const candidate = typeof mod.createAllocator === 'function' ? mod.createAllocator : mod.default;
  if (typeof candidate === 'function') {
    const factory = candidate as (context: PolicyContext) => unknown;
    return (context) => {
      let made: unknown;
      try {
        made = factory(context);
      } catch (err) {
        const text = (err instanceof Error ? err.message : String(err)).split('\n')[0];
        throw new MemscopeError('policy-error', `${spec}: the allocator factory threw: ${text}`);
      }
      return asAllocator(made, spec, 'the allocator factory returned');
    };
  }
  const allocator = asAllocator(candidate, spec, 'the default export is');
  return () => allocator;
}

function asAllocator(value: unknown, spec: string, what: string): DeviceAllocator {
  const a = value as Partial<DeviceAllocator> | null | undefined;
  if (a === null || typeof a !== 'object' || typeof a.alloc !== 'function' || typeof a.free !== 'function') {
    throw new MemscopeError(
      'policy-error',
      `${spec}: ${what} ${a === undefined ? 'nothing' : 'not an allocator'}; export a factory (default or createAllocator) returning { alloc(size, device, stream), free(address, size, device, stream) }`,
    );
  }
  return a as DeviceAllocator;
}

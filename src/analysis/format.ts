/**
 * Text views of a MemoryProfile in the formats PyTorch's memory profiler tests
 * print (test_memory_profiler.py), so a TFJS profile can be read — and pinned
 * in tests — the same way:
 *
 *   data flow   `Mul                       T0(v0), T1(v0)   ->  T2(v0)`
 *   categories  `MatMul    1 (INPUT), 2 (PARAMETER)   -> 3 (ACTIVATION)`
 *
 * Tensor names: `T<id>` is the logical tensor id. When one logical tensor
 * owned several storages (a variable across `assign`), its later storages are
 * `T<id>#1`, `T<id>#2`, … in order of appearance.
 */

import type { Category, MemoryProfile, TensorKey } from './memory-profile.js';
import type { TensorMeta } from './profile-tree.js';
import { traverseDfs } from './profile-tree.js';

function storageOrdinals(profile: MemoryProfile): Map<TensorKey, number> {
  const byId = new Map<number, TensorKey[]>();
  const seen = new Set<TensorKey>();
  const note = (k: TensorKey) => {
    if (seen.has(k)) return;
    seen.add(k);
    const list = byId.get(k.id) ?? [];
    list.push(k);
    byId.set(k.id, list);
  };
  for (const [k] of profile.categorySnapshot().keys) note(k);
  const out = new Map<TensorKey, number>();
  for (const list of byId.values()) {
    list.sort((a, b) => a.allocationId - b.allocationId);
    list.forEach((k, i) => out.set(k, i));
  }
  return out;
}

/** `T3`, or `T3#1` for a logical tensor's second storage. */
export function tensorLabel(key: TensorKey, ordinals: ReadonlyMap<TensorKey, number>): string {
  const n = ordinals.get(key) ?? 0;
  return n === 0 ? `T${key.id}` : `T${key.id}#${n}`;
}

/**
 * The data-flow graph, one line per node that reads or writes a tensor; `*`
 * marks a version the node frees. `named` lists tensors to introduce first
 * (`x:       T0`), as PyTorch's `_run_and_format_data_flow` does.
 */
export function formatDataFlow(
  profile: MemoryProfile,
  named: readonly (readonly [name: string, key: TensorKey | null])[] = [],
): string {
  const ordinals = storageOrdinals(profile);
  const lines: string[] = [];
  for (const [name, key] of named) {
    lines.push(`${(name + ':').padEnd(8)} ${key ? tensorLabel(key, ordinals) : '???'}`);
  }
  if (lines.length > 0) lines.push('');
  for (const node of profile.dataFlowGraph.flowNodes) {
    const destroyed = new Set([...node.edges].filter(([, e]) => e.isDeletion).map(([k]) => k));
    const inputs = [...node.inputs].map(([k, [, v]]) => `${tensorLabel(k, ordinals)}(v${v}${destroyed.has(k) ? '*' : ''})`);
    const outputs = [...node.outputs].map(([k, v]) => `${tensorLabel(k, ordinals)}(v${v})`);
    if (inputs.length === 0 && outputs.length === 0) continue;
    lines.push(`${node.event.name.padEnd(25)} ${inputs.join(', ').padEnd(15)}  ->  ${outputs.join(', ')}`.trimEnd());
  }
  return lines.join('\n');
}

/**
 * Every kernel and variable assign the profile recorded (nested ones too,
 * like PyTorch's dispatch mode ground truth), with each tensor as `allocation id (categories of its
 * versions)`; annotation scopes and the backward pass become section headers
 * like the test's `mark_region`.
 */
export function formatCategories(profile: MemoryProfile): string {
  const { keys, categories } = profile.categorySnapshot();
  const versionsOf = new Map<TensorKey, (Category | null)[]>();
  keys.forEach(([k], i) => {
    const list = versionsOf.get(k) ?? [];
    list.push(categories[i]!);
    versionsOf.set(k, list);
  });
  const label = (t: TensorMeta) => {
    const key = profile.keyOf(t);
    const cats = key ? versionsOf.get(key) : undefined;
    if (!key || !cats) return '???';
    const names = cats.map((c) => c ?? '???');
    const deduped = names.filter((c, i) => i === 0 || c !== names[i - 1]);
    return `${key.allocationId} (${deduped.join(',')})`;
  };
  const out: string[] = [];
  for (const e of traverseDfs(profile.recording.roots)) {
    if (e.kind === 'assign') {
      // The variable's new storage, before and after it became the variable (v0 -> v1).
      out.push(`${e.name.padEnd(40)} ${label(e.variable).padEnd(45)} -> ${label(e.variable)}`);
      continue;
    }
    if (e.kind !== 'op') continue;
    if (e.opKind === 'annotation' || e.role === 'backward-region') {
      out.push(`\n${`-- ${e.name} `.padEnd(105, '-')}`);
    } else if (e.opKind === 'kernel') {
      const inputs = (e.inputs ?? []).map(label).join(', ');
      const outputs = (e.outputs ?? []).map(label).join(', ');
      out.push(`${e.name.padEnd(40)} ${inputs.padEnd(45)} -> ${outputs}`.trimEnd());
    }
  }
  return out.join('\n');
}

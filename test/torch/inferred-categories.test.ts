// The inferred categories (src/torch/analysis/inferred-categories.ts, rules in docs/QUERY.md) on a
// hand-made step whose frames are spelled as real snapshots spell them
// (test/torch/make-category-pickles.py), and on a real training snapshot's stacks.
import { describe, expect, it } from 'vitest';
import { readSnapshotFile } from '../../src/torch/snapshot-node.js';
import { CategoryInference, TRAIT, frameTraits, phaseOfTraits } from '../../src/torch/analysis/inferred-categories.js';
import { stackFrames, type MemorySnapshot } from '../../src/torch/snapshot.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS, type ReportDeviceMemory } from '../../src/viewer/report-data.js';
import { fixture } from '../support/fixtures.js';

const KIB = 1024;

function categoriesBySize(snap: MemorySnapshot): Map<number, string> {
  const d = snapshotToReport(snap, 'x.pickle', DEFAULT_CAPS).memory!.devices[0]!;
  const f = d.facets!;
  return new Map(d.bytes.map((b, a) => [b / KIB, f.categoryNames[f.category[a]!]!]));
}

describe('inferred categories', () => {
  const snap = readSnapshotFile(fixture('torch/inferred_categories.pickle'));

  it('gives each hand-made case the category its rule names, and unknown where two rules claim it', () => {
    const bySize = categoriesBySize(snap);
    expect(Object.fromEntries([...bySize].sort((x, y) => x[0] - y[0]))).toEqual({
      1: 'parameter', // Module.to (module.py _apply / convert / to)
      2: 'activation', // forward stack, freed by a backward free
      3: 'temporary', // made and freed in one forward
      4: 'gradient', // AccumulateGrad
      5: 'temporary', // a *_backward op's buffer freed in the same backward
      6: 'optimizer_state', // torch/optim, outlives its step
      7: 'temporary', // torch/optim, freed in its step
      8: 'unknown', // torch/optim and AccumulateGrad frames
      9: 'parameter', // live before the trace and at its end, no frames
      10: 'unknown', // live throughout, but a forward stack: not the lifetime rule
      11: 'parameter', // nn.Linear.__init__
    });
  });

  it('follows the phases through the trace and counts optimizer steps', () => {
    const inf = new CategoryInference(snap, snap.traces[0]!);
    expect(inf.freeStacksAreFreeTime).toBe(true);
    const phases: string[] = [];
    for (let i = 0; i < snap.traces[0]!.count; i++) {
      const p = inf.phaseAt(i);
      if (phases[phases.length - 1] !== p) phases.push(p);
    }
    expect(phases).toEqual(['setup', 'forward', 'backward', 'optimizer']);
    expect(inf.stepAt(snap.traces[0]!.count - 1)).toBe(1);
    expect(inf.stepAt(0)).toBe(0);
  });

  it('reads the free entries as allocation stacks when the file recorded context="alloc"', () => {
    // Rewrite every free's stack to its allocation's, as PyTorch does without context="all":
    // the phases then come from allocations only, and the activation is still found.
    const t = snap.traces[0]!;
    const stack = Int32Array.from(t.stack);
    const allocOf = new Map<number, number>();
    for (let i = 0; i < t.count; i++) {
      const action = snap.actionNames[t.action[i]!];
      if (action === 'alloc') allocOf.set(t.addr[i]!, t.stack[i]!);
      else if (action === 'free_requested' || action === 'free_completed') stack[i] = allocOf.get(t.addr[i]!) ?? stack[i]!;
    }
    const allocContext: MemorySnapshot = { ...snap, traces: [{ ...t, stack }] };
    const inf = new CategoryInference(allocContext, allocContext.traces[0]!);
    expect(inf.freeStacksAreFreeTime).toBe(false);
    const bySize = categoriesBySize(allocContext);
    expect(bySize.get(2)).toBe('activation');
    expect(bySize.get(6)).toBe('optimizer_state');
    expect(bySize.get(7)).toBe('temporary');
  });

  it('reads frame traits from the names PyTorch writes', () => {
    const f = (filename: string, name: string) => frameTraits({ filename, name, line: 1 });
    expect(f('/x/site-packages/torch/optim/optimizer.py', 'wrapper')).toBe(TRAIT.optimizer);
    expect(f('C:\\py\\Lib\\site-packages\\torch\\optim\\adam.py', '_init_group')).toBe(TRAIT.optimizer);
    expect(f('/x/site-packages/torch/optim/optimizer.py', 'zero_grad')).toBe(0);
    expect(f('/home/u/my_optim/torch_optim.py', 'step')).toBe(0);
    expect(f('accumulate_grad.cpp', 'torch::autograd::(anonymous namespace)::AccumulateGrad_apply_impl(std::vector<at::Tensor>&&)')).toBe(TRAIT.gradient | TRAIT.backward);
    expect(f('??', 'torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)')).toBe(TRAIT.backward);
    expect(f('/x/torch/nn/modules/module.py', '_apply')).toBe(TRAIT.parameterSetup);
    expect(f('/x/torch/nn/modules/module.py', '_call_impl')).toBe(TRAIT.forward);
    expect(f('/x/torch/_tensor.py', 'backward')).toBe(TRAIT.backward);
    expect(phaseOfTraits(TRAIT.optimizer | TRAIT.backward)).toBe('unknown');
    expect(phaseOfTraits(TRAIT.forward | TRAIT.parameterSetup)).toBe('unknown');
  });

  it('on a real training step: optimizer state from torch/optim, activations from forward stacks freed in backward', () => {
    const real = readSnapshotFile(fixture('torch/transformer_fullstep_trace.pickle'));
    const report = snapshotToReport(real, 'x.pickle', DEFAULT_CAPS);
    const d: ReportDeviceMemory = report.memory!.devices[0]!;
    const f = d.facets!;
    const trace = real.traces.find((t) => t.count > 0)!;
    const inf = new CategoryInference(real, trace);
    const count = new Map<string, number>();
    for (let a = 0; a < d.bytes.length; a++) {
      const cat = f.categoryNames[f.category[a]!]!;
      count.set(cat, (count.get(cat) ?? 0) + 1);
      if (d.start[a]! < 0) continue;
      const frames = stackFrames(real, trace.stack[d.start[a]!]!);
      if (cat === 'optimizer_state') {
        expect(frames.some((x) => x.filename.includes('torch/optim/'))).toBe(true);
        expect(d.end[a]).toBe(-1);
      }
      if (cat === 'activation') {
        expect(frames.some((x) => x.name === '_call_impl')).toBe(true);
        expect(inf.phaseAt(d.end[a]!)).toBe('backward');
      }
    }
    // The step's Adam-style state: two zeros_like buffers per parameter (optimizers.py:82 and :84), kept.
    expect(count.get('optimizer_state')).toBe(582);
    expect(count.get('activation')).toBeGreaterThan(100);
    expect(count.get('parameter')).toBeGreaterThan(100);
  });

  it('applies the lifetime rule only where the trace allocates (not to a state-only snapshot)', () => {
    const stateOnly = readSnapshotFile(fixture('torch/state_only_259seg.pickle'));
    const d = snapshotToReport(stateOnly, 'x.pickle', DEFAULT_CAPS).memory!.devices[0]!;
    expect(stateOnly.traces[0]!.action.every((a) => stateOnly.actionNames[a] !== 'alloc')).toBe(true);
    const cats = new Set(d.facets!.category.map((c) => d.facets!.categoryNames[c]));
    expect([...cats]).toEqual(['unknown']);
  });
});


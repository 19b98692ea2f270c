// transformers.js (@huggingface/transformers) under memscope/webgpu with memscope/browser's
// attribution, in headless Chromium (SwiftShader's WebGPU). The model is the tiny GPT-2 that
// test/browser/pages/browser-make-tiny-gpt2.py writes into test/fixtures/transformers/; it, ONNX
// Runtime Web's wasm and the page's bundle are served through the page's route, with remote
// models off: nothing touches the network.
import type { Browser } from 'playwright-core';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../support/browser.js';
import { repoRoot } from '../support/fixtures.js';
import { openServedPage } from './pages/browser-server.js';

const ENTRY = `
import { env, pipeline } from '@huggingface/transformers';
import { installWebGPU } from './src/webgpu/index.ts';
import { attachTransformers } from './src/browser/index.ts';
globalThis.tjs = { env, pipeline };
globalThis.memscope = { installWebGPU, attachTransformers };
`;
// transformers.js's own copy of ONNX Runtime Web (its version, not the one beside memscope's).
const ORT_DIR = '/node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist/';
const MODELS = '/test/fixtures/transformers/';
const BUNDLE = '/memscope-transformers-page.mjs';

// config.json: 2 layers × (key, value) of [1, 2 heads, positions, 16] float32.
const LAYERS = 2;
const KV_BYTES_PER_POSITION = LAYERS * 2 * 2 * 16 * 4;
// wte 256×32 + 2 × (Wk, Wv) 32×32 + lm_head 32×256, float32.
const WEIGHT_BYTES = (256 * 32 + LAYERS * 2 * 32 * 32 + 32 * 256) * 4;
const PROMPT = 'hello';
const NEW_TOKENS = 6;

/** The page program: load the pipeline, generate twice (the second keeping its cache), read the attribution. */
const program = (device: 'webgpu' | 'wasm'): string => `(async () => {
  const { env, pipeline } = globalThis.tjs;
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = ${JSON.stringify(MODELS)};
  env.useBrowserCache = false;
  env.backends.onnx.wasm.wasmPaths = ${JSON.stringify(ORT_DIR)};
  env.backends.onnx.wasm.numThreads = 1;
  const memory = memscope.installWebGPU();
  memory.recordMemoryHistory();
  const tjs = memscope.attachTransformers({ memory });
  const generator = await tjs.load('tiny-gpt2', () => pipeline('text-generation', 'tiny-gpt2', { device: ${JSON.stringify(device)}, dtype: 'fp32' }));
  const loaded = memory.devices().length ? memory.figures(0) : null;
  const first = await generator(${JSON.stringify(PROMPT)}, { max_new_tokens: ${NEW_TOKENS}, do_sample: false });
  const afterFirst = tjs.undisposedOutputs();
  const kept = await generator.model.generate({ ...generator.tokenizer(${JSON.stringify(PROMPT)}), max_new_tokens: 3, do_sample: false, return_dict_in_generate: true });
  const whileKept = tjs.undisposedOutputs();
  const keptCategory = whileKept.length ? (memory.resources(0).find((r) => r.attribution.category === 'KV cache')?.attribution ?? null) : null;
  await kept.past_key_values.dispose();
  const refusal = (fn) => {
    try {
      fn();
      return null;
    } catch (err) {
      return err.name + ' ' + err.code + ': ' + err.message;
    }
  };
  const result = {
    refusals: [refusal(() => memscope.attachTransformers({ memory: {} })), refusal(() => tjs.track({}, 'nothing'))],
    text: first[0].generated_text,
    models: tjs.models(), generations: tjs.generations(), steps: tjs.steps(),
    afterFirst, whileKept, afterDispose: tjs.undisposedOutputs(), keptCategory,
    loaded, byCategory: memory.devices().length ? memory.figures(0).byCategory : null,
    devices: memory.devices().map((d) => d.device),
    stepAnnotations: memory.snapshot().external_annotations.filter((a) => a.stage === 'START').map((a) => a.name),
    warnings: [...memory.warnings],
  };
  const sessionRun = generator.model.sessions.model.run;
  tjs.detach();
  result.restored = generator.model.sessions.model.run !== sessionRun && !Object.prototype.hasOwnProperty.call(generator.model, 'generate');
  await generator.dispose();
  memory.uninstall();
  return result;
})()`;

describe('transformers.js attribution in headless Chromium', () => {
  let browser: Browser;
  let bundle: string;
  beforeAll(async () => {
    const out = await build({
      stdin: { contents: ENTRY, resolveDir: repoRoot, loader: 'ts', sourcefile: 'browser-transformers-page.ts' },
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      logLevel: 'silent',
    });
    bundle = out.outputFiles[0]!.text;
    browser = await launchChromium({ webgpu: true });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
  });

  it('a pipeline on WebGPU: its load is the weights, each generate step a step whose KV cache grows by one position, kept caches listed until disposed', { timeout: 600_000 }, async () => {
    const { page, errors } = await openServedPage(browser, { scripts: { [BUNDLE]: bundle }, allow: [ORT_DIR, MODELS] });
    try {
      await page.addScriptTag({ url: BUNDLE, type: 'module' });
      await page.waitForFunction(() => 'tjs' in globalThis);
      const r: any = await page.evaluate(program('webgpu'));
      expect(errors).toEqual([]);
      expect(r.warnings).toEqual([]);
      expect(r.text.startsWith(PROMPT)).toBe(true);
      expect(r.devices).toEqual(['webgpu:0']);
      // The load uploads exactly the model's initializers (and the reshape's 4 int64), as Parameter.
      expect(r.models).toEqual([{ name: 'tiny-gpt2', sessions: ['model'], weightBytes: r.loaded.byCategory.Parameter.reserved, durationMs: expect.any(Number) }]);
      expect(r.loaded.byCategory.Parameter.reserved).toBeGreaterThanOrEqual(WEIGHT_BYTES);
      expect(r.loaded.byCategory.Parameter.reserved).toBeLessThan(WEIGHT_BYTES + 1024);
      // Generation 1: the prompt's step, then one step a new token but the last; generation 2 the same for 3 tokens.
      expect(r.generations.map((g: any) => [g.index, g.steps])).toEqual([[1, NEW_TOKENS], [2, 3]]);
      const first = r.steps.filter((s: any) => s.generation === 1);
      expect(first.map((s: any) => s.pastLength)).toEqual([0, 5, 6, 7, 8, 9]);
      // The KV cache each step reads grows by one position a token: its bytes, exactly.
      expect(first.map((s: any) => s.pastBytes)).toEqual(first.map((s: any) => s.pastLength * KV_BYTES_PER_POSITION));
      expect(first.map((s: any) => s.presentBytes)).toEqual(first.map((s: any) => (s.pastLength + (s.step === 1 ? PROMPT.length : 1)) * KV_BYTES_PER_POSITION));
      expect(r.stepAnnotations.slice(0, 2)).toEqual(['generate #1 step 1', 'generate #1 step 2']);
      // transformers.js disposes the cache when generate() ends…
      expect(r.afterFirst).toEqual([]);
      // …unless the program keeps it (return_dict_in_generate): then its tensors are the program's to dispose.
      expect(r.whileKept.map((o: any) => [o.generation, o.name, o.bytes])).toEqual(
        ['present.0.key', 'present.0.value', 'present.1.key', 'present.1.value'].map((name) => [2, name, (PROMPT.length + 2) * KV_BYTES_PER_POSITION / 4]),
      );
      expect(r.keptCategory).toMatchObject({ category: 'KV cache', framework: 'transformers.js' });
      expect(r.afterDispose).toEqual([]);
      expect(r.byCategory.Parameter.allocated).toBe(r.loaded.byCategory.Parameter.reserved);
      expect(r.restored).toBe(true);
      expect(r.refusals).toEqual([
        "MemscopeError bad-argument: attachTransformers: options.memory must be memscope/webgpu's installWebGPU()",
        'MemscopeError bad-argument: attachTransformers: nothing is neither a transformers.js pipeline (with .model) nor a model (with .sessions)',
      ]);
    } finally {
      await page.close();
    }
  });

  it('the same pipeline on the wasm device: nothing on the GPU, each step still gives its KV cache bytes', { timeout: 600_000 }, async () => {
    const { page, errors } = await openServedPage(browser, { scripts: { [BUNDLE]: bundle }, allow: [ORT_DIR, MODELS] });
    try {
      await page.addScriptTag({ url: BUNDLE, type: 'module' });
      await page.waitForFunction(() => 'tjs' in globalThis);
      const r: any = await page.evaluate(program('wasm'));
      expect(errors).toEqual([]);
      expect(r.text.startsWith(PROMPT)).toBe(true);
      expect(r.models.map((m: any) => [m.name, m.weightBytes])).toEqual([['tiny-gpt2', 0]]);
      expect(r.generations.map((g: any) => [g.index, g.steps, g.peakAdded])).toEqual([[1, NEW_TOKENS, 0], [2, 3, 0]]);
      const first = r.steps.filter((s: any) => s.generation === 1);
      expect(first.map((s: any) => s.pastBytes)).toEqual([0, 5, 6, 7, 8, 9].map((n) => n * KV_BYTES_PER_POSITION));
      // The kept cache is in wasm memory: no GPU tensor for the program to dispose.
      expect(r.whileKept).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

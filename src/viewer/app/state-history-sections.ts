/**
 * The report sections built from a snapshot's history data (`data.history`): Allocator State
 * History, Active Cached Segment Timeline and allocator settings. Each shows only when the source
 * has data for it; the devices' state models are made once and shared by the first two.
 */
import type { ReportData } from '../report-data.js';
import { allocatorHistories } from './state-history-model.js';
import { StateHistoryView } from './state-history.js';
import { SegmentTimelineView } from './segment-timeline.js';
import { renderAllocatorSettings } from './settings.js';

export function renderHistorySections(data: ReportData): void {
  const history = data.history;
  if (!history || !data.memory) return;
  const models = allocatorHistories(history);
  const section = (id: string): HTMLElement | null => document.getElementById(id);
  const settings = section('allocator-settings');
  if (settings) {
    renderAllocatorSettings(section('allocator-settings-body')!, history);
    settings.hidden = false;
  }
  const withState = models.filter((m) => m.n > 0 || m.device.segments.length > 0);
  const stateBox = section('state-history');
  if (stateBox && withState.length) {
    stateBox.hidden = false;
    const view = new StateHistoryView(data, section('state-history-body')!, withState);
    window.memscopeHistory = {
      select: (device, event) => {
        view.selectDevice(device);
        view.select(event);
      },
      position: () => view.position(),
      locate: (address) => view.locate(address),
      state: () => view.state(),
      get lastStepMs() {
        return view.lastStepMs;
      },
      get steps() {
        return view.steps;
      },
    };
  }
  const traced = models.filter((m) => m.n > 0);
  const segBox = section('segment-timeline');
  if (segBox && traced.length) {
    segBox.hidden = false;
    const view = new SegmentTimelineView(data, section('segment-timeline-body')!, traced);
    window.memscopeSegments = {
      selectDevice: (i) => view.selectDevice(i),
      peak: () => view.peak(),
      locate: (a) => view.locate(a),
      locateOom: (k) => view.locateOom(k),
      get frames() {
        return view.frames;
      },
    };
  }
}

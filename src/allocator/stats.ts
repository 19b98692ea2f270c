/**
 * PyTorch's allocator statistics: every figure is a Stat with current, peak,
 * allocated (total increases) and freed (total decreases), kept per pool
 * (all / small_pool / large_pool) for the core families.
 */

export class Stat {
  current = 0;
  peak = 0;
  allocated = 0;
  freed = 0;

  increase(amount: number): void {
    this.current += amount;
    this.allocated += amount;
    if (this.current > this.peak) this.peak = this.current;
  }

  decrease(amount: number): void {
    this.current -= amount;
    this.freed += amount;
  }

  resetAccumulated(): void {
    this.allocated = 0;
    this.freed = 0;
  }

  resetPeak(): void {
    this.peak = this.current;
  }

  toJSON(): { current: number; peak: number; allocated: number; freed: number } {
    return { current: this.current, peak: this.peak, allocated: this.allocated, freed: this.freed };
  }
}

/** Index order of PyTorch's StatType. */
export const POOL_KEYS = ['all', 'small_pool', 'large_pool'] as const;
export type PoolKey = (typeof POOL_KEYS)[number];
export const AGGREGATE = 0;
export const SMALL_POOL = 1;
export const LARGE_POOL = 2;

export type PoolStats = [Stat, Stat, Stat];

function poolStats(): PoolStats {
  return [new Stat(), new Stat(), new Stat()];
}

/** The per-pool families, named as PyTorch's memory_stats names them. */
export const POOL_FAMILIES = [
  'allocation',
  'segment',
  'active',
  'inactive_split',
  'allocated_bytes',
  'reserved_bytes',
  'active_bytes',
  'inactive_split_bytes',
  'requested_bytes',
] as const;
export type PoolFamily = (typeof POOL_FAMILIES)[number];

export class DeviceStats {
  readonly allocation = poolStats();
  readonly segment = poolStats();
  readonly active = poolStats();
  readonly inactive_split = poolStats();
  readonly allocated_bytes = poolStats();
  readonly reserved_bytes = poolStats();
  readonly active_bytes = poolStats();
  readonly inactive_split_bytes = poolStats();
  readonly requested_bytes = poolStats();
  readonly oversize_allocations = new Stat();
  readonly oversize_segments = new Stat();
  num_alloc_retries = 0;
  num_ooms = 0;
  num_sync_all_streams = 0;
  num_device_alloc = 0;
  num_device_free = 0;

  private allStats(): Stat[] {
    const out: Stat[] = [this.oversize_allocations, this.oversize_segments];
    for (const f of POOL_FAMILIES) out.push(...this[f]);
    return out;
  }

  resetAccumulated(): void {
    for (const s of this.allStats()) s.resetAccumulated();
    this.num_alloc_retries = 0;
    this.num_ooms = 0;
    this.num_sync_all_streams = 0;
    this.num_device_alloc = 0;
    this.num_device_free = 0;
  }

  resetPeak(): void {
    for (const s of this.allStats()) s.resetPeak();
  }
}

export interface StatValues {
  current: number;
  peak: number;
  allocated: number;
  freed: number;
}

/** The nested dict of torch.cuda.memory_stats_as_nested_dict. */
export interface NestedMemoryStats {
  num_alloc_retries: number;
  num_ooms: number;
  max_split_size: number;
  num_sync_all_streams: number;
  num_device_alloc: number;
  num_device_free: number;
  allocation: Record<PoolKey, StatValues>;
  segment: Record<PoolKey, StatValues>;
  active: Record<PoolKey, StatValues>;
  inactive_split: Record<PoolKey, StatValues>;
  allocated_bytes: Record<PoolKey, StatValues>;
  reserved_bytes: Record<PoolKey, StatValues>;
  active_bytes: Record<PoolKey, StatValues>;
  inactive_split_bytes: Record<PoolKey, StatValues>;
  requested_bytes: Record<PoolKey, StatValues>;
  oversize_allocations: StatValues;
  oversize_segments: StatValues;
}

export function nestedStats(stats: DeviceStats, maxSplitSize: number): NestedMemoryStats {
  const pools = (family: PoolFamily): Record<PoolKey, StatValues> => {
    const out = {} as Record<PoolKey, StatValues>;
    POOL_KEYS.forEach((key, i) => {
      out[key] = stats[family][i].toJSON();
    });
    return out;
  };
  return {
    num_alloc_retries: stats.num_alloc_retries,
    num_ooms: stats.num_ooms,
    max_split_size: maxSplitSize === Infinity ? -1 : maxSplitSize,
    num_sync_all_streams: stats.num_sync_all_streams,
    num_device_alloc: stats.num_device_alloc,
    num_device_free: stats.num_device_free,
    allocation: pools('allocation'),
    segment: pools('segment'),
    active: pools('active'),
    inactive_split: pools('inactive_split'),
    allocated_bytes: pools('allocated_bytes'),
    reserved_bytes: pools('reserved_bytes'),
    active_bytes: pools('active_bytes'),
    inactive_split_bytes: pools('inactive_split_bytes'),
    requested_bytes: pools('requested_bytes'),
    oversize_allocations: stats.oversize_allocations.toJSON(),
    oversize_segments: stats.oversize_segments.toJSON(),
  };
}

/**
 * torch.cuda.memory_stats: the nested dict flattened to dotted keys, sorted
 * (Python sorts the (key, value) pairs, so keys are in code-point order).
 */
export function flattenStats(nested: NestedMemoryStats): Record<string, number> {
  const pairs: [string, number][] = [];
  const walk = (prefix: string, value: unknown): void => {
    if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) walk(prefix ? `${prefix}.${k}` : k, v);
    } else {
      pairs.push([prefix, value as number]);
    }
  };
  walk('', nested);
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: Record<string, number> = {};
  for (const [k, v] of pairs) out[k] = v;
  return out;
}

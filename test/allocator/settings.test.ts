import { describe, expect, it } from 'vitest';
import { parseAllocatorConf, settingsFromSnapshot, toSnapshotSettings } from '../../src/allocator/settings.js';
import { MemscopeError } from '../../src/core/errors.js';

const MiB = 1024 * 1024;

describe('parseAllocatorConf', () => {
  it('reads every modelled option in PyTorch syntax', () => {
    const s = parseAllocatorConf(
      'max_split_size_mb:128, roundup_power2_divisions:[256:1,512:2,>:4],garbage_collection_threshold:0.6,expandable_segments:True,max_non_split_rounding_mb:32,backend:native',
    );
    expect(s.maxSplitSize).toBe(128 * MiB);
    expect(s.maxNonSplitRoundingSize).toBe(32 * MiB);
    expect(s.garbageCollectionThreshold).toBe(0.6);
    expect(s.expandableSegments).toBe(true);
    expect(s.roundupPower2Divisions).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4]);
    expect(toSnapshotSettings(s).roundup_power2_divisions).toMatchObject({ '1': 1, '256': 1, '512': 4, '32768': 4 });
    expect(toSnapshotSettings(parseAllocatorConf('')).max_split_size).toBe(-1);
  });

  it.each([
    ['max_split_size_mb:abc', 'max_split_size_mb expects a number, got "abc"'],
    ['max_split_size_mb:10', 'max_split_size_mb too small, must be > 20'],
    ['garbage_collection_threshold:1.5', 'garbage_collection_threshold too big, set it 0.0~1.0'],
    ['garbage_collection_threshold:0', 'garbage_collection_threshold too small, set it 0.0~1.0'],
    ['roundup_power2_divisions:3', 'roundup_power2_divisions must be a power of 2, got 3'],
    ['roundup_power2_divisions:[100:2]', 'roundup_power2_divisions: interval 100 MB is not a power of 2'],
    ['roundup_power2_divisions:[256:2', "unbalanced '[': a list value is not closed"],
    ['expandable_segments:yes', 'expandable_segments expects True or False, got "yes"'],
    ['max_split_size', 'option "max_split_size" has no \':VALUE\''],
    ['expandable_segments:True,expandable_segments:False', 'option expandable_segments given twice'],
    ['backend:cudaMalloc', 'backend must be native or cudaMallocAsync, got "cudaMalloc"'],
    ['max_spilt_size_mb:128', 'unrecognized option "max_spilt_size_mb"'],
  ])('%j → %s', (conf, message) => {
    let error: unknown;
    try {
      parseAllocatorConf(conf);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MemscopeError);
    expect((error as MemscopeError).code).toBe('bad-alloc-conf');
    expect((error as MemscopeError).message).toContain(`allocator settings ${JSON.stringify(conf)}: `);
    expect((error as MemscopeError).message).toContain(message);
  });
});

describe('settingsFromSnapshot', () => {
  it('reads PyTorch’s allocator_settings dict, and defaults when a file has none', () => {
    const s = settingsFromSnapshot({
      PYTORCH_CUDA_ALLOC_CONF: 'max_split_size_mb:64,max_non_split_rounding_mb:40',
      max_split_size: 64 * MiB,
      garbage_collection_threshold: 0,
      expandable_segments: false,
      roundup_power2_divisions: { '1': 0, '2': 0, '4': 8 },
    });
    expect(s.maxSplitSize).toBe(64 * MiB);
    expect(s.maxNonSplitRoundingSize).toBe(40 * MiB);
    expect(s.roundupPower2Divisions.slice(0, 4)).toEqual([0, 0, 8, 0]);
    expect(settingsFromSnapshot(undefined).maxSplitSize).toBe(Infinity);
    expect(() => settingsFromSnapshot({ max_split_size: 'big' })).toThrow(/allocator_settings\.max_split_size: expected a number/);
  });
});

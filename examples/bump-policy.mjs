// A bump allocator for `memscope replay FILE --allocator ./examples/bump-policy.mjs`.
// Every request gets fresh address space right after the previous one (512 B aligned);
// nothing is ever reused, so its reserved memory is everything it ever handed out.
const ALIGN = 512;

export default function createAllocator({ capacity }) {
  const base = 0x100000000;
  let top = 0;
  return {
    name: 'bump',
    alloc(size, device, stream) {
      const rounded = Math.ceil(size / ALIGN) * ALIGN;
      if (capacity !== null && top + rounded > capacity) return null; // out of memory
      const address = base + top;
      top += rounded;
      return address;
    },
    free(address, size, device, stream) {
      // A bump allocator never takes memory back.
    },
    reservedBytes(device) {
      return top;
    },
  };
}

#pragma once
// Function multiversioning for the hand-vectorised CPU loops (internal to the library and the
// benchmarks: not installed). GCC compiles a marked function once per listed micro-architecture
// and the loader picks the clone for the CPU it runs on, so no -march is needed and the library
// still runs on any x86-64.
//
// Two sets, because each is the faster one measured for its own loops:
//   FLT_CLONES         AVX2+FMA (x86-64-v3) and the baseline: the fused attention kernels
//                      (kernels/src/*_cpu.cpp) and the benchmarks' FMA probe. An AVX-512 clone
//                      of the kernels was never measured, and
//                      each clone is a code path of its own whose vector widths change the order
//                      of the sums.
//   FLT_CLONES_AVX512  AVX-512 (x86-64-v4) first: the learned optimizer's fused step
//                      (kernels/src/coordinate_step.cpp) works on blocks of 16 float
//                      lanes, one AVX-512 register; 56 ns per coordinate against 81 for its AVX2
//                      clone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FLT_TARGET_CLONES(...) __attribute__((target_clones(__VA_ARGS__, "default")))
#else
#define FLT_TARGET_CLONES(...)
#endif
#define FLT_CLONES FLT_TARGET_CLONES("arch=x86-64-v3")
#define FLT_CLONES_AVX512 FLT_TARGET_CLONES("arch=x86-64-v4", "arch=x86-64-v3")

/// Small helpers called inside cloned loops: inlined, so each clone compiles its own copy.
#define FLT_INLINE inline __attribute__((always_inline))

/* What an AVX-512 IFMA core charges for beside vpmadd52: cycles per loop iteration of small
 * instruction mixes, each a fixed count of independent 512-bit products plus one kind of
 * other work (stores, loads, memory operands, masked blends, integer vector operations).
 * Built and run by scripts/ifma-mix.sh; not part of kae. Cycles come from rdtsc scaled by a
 * chain of dependent 64-bit multiplies (three cycles each on every x86 core this targets; a
 * chain of adds of an immediate is no clock on Intel cores from Golden Cove on, which execute
 * many of them per cycle). */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <x86intrin.h>

#define ITER 4000000L

static __m512i buf[128] __attribute__((aligned(64)));
static double ticks_per_cycle;

#define LO(a) a = _mm512_madd52lo_epu64(a, x, y);
#define HI(a) a = _mm512_madd52hi_epu64(a, x, y);
#define PRODUCTS16                                                                             \
    LO(a0) LO(a1) LO(a2) LO(a3) LO(a4) LO(a5) LO(a6) LO(a7)                                   \
    HI(a8) HI(a9) HI(a10) HI(a11) HI(a12) HI(a13) HI(a14) HI(a15)
#define KEEP                                                                                   \
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),        \
                     "+v"(a6), "+v"(a7));                                                      \
    __asm__ volatile("" : "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11), "+v"(a12), "+v"(a13),    \
                     "+v"(a14), "+v"(a15), "+v"(z), "+r"(p));
#define STORE(off) __asm__ volatile("vmovdqa64 %0, " #off "(%1)" ::"v"(z), "r"(p) : "memory");
#define LOAD_MERGE(r, off) __asm__ volatile("vmovdqa64 " #off "(%1), %0%{%2%}" : "+v"(r) : "r"(p), "Yk"(k));
#define LOAD_ZERO(r, off) __asm__ volatile("vmovdqa64 " #off "(%1), %0%{%2%}%{z%}" : "=v"(r) : "r"(p), "Yk"(k));
#define STORE_MASKED(off) __asm__ volatile("vmovdqa64 %0, " #off "(%1)%{%2%}" ::"v"(z), "r"(p), "Yk"(k) : "memory");
#define MEM_LO(a, off) __asm__ volatile("vpmadd52luq " #off "(%1), %2, %0" : "+v"(a) : "r"(p), "v"(x));
#define MEM_HI(a, off) __asm__ volatile("vpmadd52huq " #off "(%1), %2, %0" : "+v"(a) : "r"(p), "v"(x));

/* Runs BODY ITER times; prints cycles per iteration and, against BASE, per added instruction. */
#define MIX(name, base, added, ...)                                                            \
    do {                                                                                       \
        __m512i a0 = _mm512_set1_epi64(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,       \
                a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0,    \
                a14 = a0, a15 = a0;                                                            \
        __m512i x = _mm512_set1_epi64(3), y = _mm512_set1_epi64(5), z = _mm512_set1_epi64(7); \
        __m512i *p = buf;                                                                      \
        uint64_t t0 = __rdtsc();                                                               \
        for (long i = 0; i < ITER; i++) {                                                      \
            __VA_ARGS__ KEEP                                                                   \
        }                                                                                      \
        double c = (double)(__rdtsc() - t0) / ITER / ticks_per_cycle;                         \
        _mm512_store_si512(&buf[120], _mm512_add_epi64(_mm512_add_epi64(a0, a15), z));        \
        last = report(name, c, base, added);                                                   \
    } while (0)

/* Prints one mix: cycles per iteration and, when instructions were added to a baseline of
 * `base` cycles, cycles per added instruction. Returns the cycles. */
static double report(const char *name, double cycles, double base, int added) {
    if (added > 0)
        printf("%-52s %7.2f %9.2f\n", name, cycles, (cycles - base) / added);
    else
        printf("%-52s %7.2f\n", name, cycles);
    return cycles;
}

static double calibrate(void) {
    uint64_t v = 3, t0 = __rdtsc();
    for (long i = 0; i < 50000000L; i++)
        __asm__ volatile("imul %0,%0\n\timul %0,%0\n\timul %0,%0\n\timul %0,%0" : "+r"(v));
    return (double)(__rdtsc() - t0) / (3 * 4 * 5e7);
}

int main(void) {
    double last = 0, base;
    ticks_per_cycle = calibrate();
    printf("time-stamp ticks per core cycle: %.3f\n", ticks_per_cycle);
    printf("%-52s %7s %9s\n", "mix (per iteration)", "cycles", "per added");
    {
        __m512i a = _mm512_set1_epi64(1), x = _mm512_set1_epi64(3), y = _mm512_set1_epi64(5);
        uint64_t t0 = __rdtsc();
        for (long i = 0; i < ITER; i++) {
            a = _mm512_madd52lo_epu64(a, x, y);
            a = _mm512_madd52lo_epu64(a, x, y);
            a = _mm512_madd52lo_epu64(a, x, y);
            a = _mm512_madd52lo_epu64(a, x, y);
        }
        double c = (double)(__rdtsc() - t0) / ITER / 4 / ticks_per_cycle;
        _mm512_store_si512(&buf[121], a);
        printf("%-52s %7.2f\n", "one dependent vpmadd52luq (latency)", c);
    }
    MIX("16 independent products (register operands)", 0, 0, PRODUCTS16);
    base = last;
    MIX("16 products + 8 vpaddq/vpsraq/vpandq", base, 8, PRODUCTS16 {
        __m512i t = _mm512_add_epi64(z, y); /* z changes per iteration (KEEP): not hoisted */
        t = _mm512_srai_epi64(t, 3);
        t = _mm512_and_si512(t, x);
        t = _mm512_add_epi64(t, y);
        t = _mm512_srai_epi64(t, 3);
        t = _mm512_and_si512(t, x);
        t = _mm512_add_epi64(t, y);
        t = _mm512_srai_epi64(t, 3);
        __asm__ volatile("" ::"v"(t));
    });
    MIX("16 products + 8 loads of their multiplicands", base, 8, {
        __m512i m0 = p[0], m1 = p[1], m2 = p[2], m3 = p[3], m4 = p[4], m5 = p[5], m6 = p[6],
                m7 = p[7];
        __asm__ volatile("" : "+v"(m0), "+v"(m1), "+v"(m2), "+v"(m3), "+v"(m4), "+v"(m5),
                         "+v"(m6), "+v"(m7));
        a0 = _mm512_madd52lo_epu64(a0, x, m0); a1 = _mm512_madd52hi_epu64(a1, x, m0);
        a2 = _mm512_madd52lo_epu64(a2, x, m1); a3 = _mm512_madd52hi_epu64(a3, x, m1);
        a4 = _mm512_madd52lo_epu64(a4, x, m2); a5 = _mm512_madd52hi_epu64(a5, x, m2);
        a6 = _mm512_madd52lo_epu64(a6, x, m3); a7 = _mm512_madd52hi_epu64(a7, x, m3);
        a8 = _mm512_madd52lo_epu64(a8, x, m4); a9 = _mm512_madd52hi_epu64(a9, x, m4);
        a10 = _mm512_madd52lo_epu64(a10, x, m5); a11 = _mm512_madd52hi_epu64(a11, x, m5);
        a12 = _mm512_madd52lo_epu64(a12, x, m6); a13 = _mm512_madd52hi_epu64(a13, x, m6);
        a14 = _mm512_madd52lo_epu64(a14, x, m7); a15 = _mm512_madd52hi_epu64(a15, x, m7);
    });
    MIX("16 products, each with a memory operand", base, 16,
        MEM_LO(a0, 0) MEM_HI(a1, 0) MEM_LO(a2, 64) MEM_HI(a3, 64) MEM_LO(a4, 128)
        MEM_HI(a5, 128) MEM_LO(a6, 192) MEM_HI(a7, 192) MEM_LO(a8, 256) MEM_HI(a9, 256)
        MEM_LO(a10, 320) MEM_HI(a11, 320) MEM_LO(a12, 384) MEM_HI(a13, 384) MEM_LO(a14, 448)
        MEM_HI(a15, 448));
    MIX("16 products + 2 compares and 6 masked blends", base, 8, PRODUCTS16 {
        __mmask8 k = _mm512_cmpeq_epi64_mask(x, z);
        __mmask8 k2 = _mm512_cmpeq_epi64_mask(y, z);
        __m512i b0 = _mm512_mask_blend_epi64(k, x, y), b1 = _mm512_mask_blend_epi64(k, y, z);
        __m512i b2 = _mm512_mask_blend_epi64(k, z, x), b3 = _mm512_mask_blend_epi64(k2, x, y);
        __m512i b4 = _mm512_mask_blend_epi64(k2, y, z), b5 = _mm512_mask_blend_epi64(k2, z, x);
        __asm__ volatile("" ::"v"(b0), "v"(b1), "v"(b2), "v"(b3), "v"(b4), "v"(b5));
    });
    /* A table scan's possible selections: blends (above), masked loads, masked stores. */
    MIX("16 products + 8 merge-masked loads", base, 8, PRODUCTS16 {
        __mmask8 k = _mm512_cmpeq_epi64_mask(x, z);
        __m512i r0 = z, r1 = z, r2 = z, r3 = z;
        LOAD_MERGE(r0, 0) LOAD_MERGE(r1, 64) LOAD_MERGE(r2, 128) LOAD_MERGE(r3, 192)
        LOAD_MERGE(r0, 256) LOAD_MERGE(r1, 320) LOAD_MERGE(r2, 384) LOAD_MERGE(r3, 448)
        __asm__ volatile("" ::"v"(r0), "v"(r1), "v"(r2), "v"(r3));
    });
    MIX("16 products + 8 zero-masked loads", base, 8, PRODUCTS16 {
        __mmask8 k = _mm512_cmpeq_epi64_mask(x, z);
        __m512i r0, r1, r2, r3, r4, r5, r6, r7;
        LOAD_ZERO(r0, 0) LOAD_ZERO(r1, 64) LOAD_ZERO(r2, 128) LOAD_ZERO(r3, 192)
        LOAD_ZERO(r4, 256) LOAD_ZERO(r5, 320) LOAD_ZERO(r6, 384) LOAD_ZERO(r7, 448)
        __asm__ volatile("" ::"v"(r0), "v"(r1), "v"(r2), "v"(r3), "v"(r4), "v"(r5), "v"(r6),
                         "v"(r7));
    });
    MIX("16 products + 4 masked stores", base, 4, PRODUCTS16 {
        __mmask8 k = _mm512_cmpeq_epi64_mask(x, z);
        STORE_MASKED(4096) STORE_MASKED(4160) STORE_MASKED(4224) STORE_MASKED(4288)
    });
    MIX("16 products + 1 store", base, 1, PRODUCTS16 STORE(4096));
    MIX("16 products + 2 stores", base, 2, PRODUCTS16 STORE(4096) STORE(4160));
    MIX("16 products + 4 stores", base, 4,
        PRODUCTS16 STORE(4096) STORE(4160) STORE(4224) STORE(4288));
    MIX("16 products + 8 stores", base, 8,
        PRODUCTS16 STORE(4096) STORE(4160) STORE(4224) STORE(4288) STORE(4352) STORE(4416)
            STORE(4480) STORE(4544));
    MIX("8 stores alone", 0, 8,
        STORE(4096) STORE(4160) STORE(4224) STORE(4288) STORE(4352) STORE(4416) STORE(4480)
            STORE(4544));
    return 0;
}

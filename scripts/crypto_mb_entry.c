/* crypto_mb_entry.c: the peer column of `scripts/ifma-emulate.sh --count --peer-crypto-mb`.
 *
 * A yardstick for measurement only, not part of kae: kae.so never links it, nor crypto_mb.
 * ifma-emulate.sh compiles this file into a small executable, linked statically against
 * Intel's crypto_mb (libcrypto_mb.a, see shared/reference/crypto_mb/README.md):
 *   cc -O2 -fPIE -pie -I$DIR/include -o crypto_mb_emulate crypto_mb_entry.c \
 *      $DIR/lib/libcrypto_mb.a -lcrypto
 * (-lcrypto: libcrypto_mb.a's conversion object references BN_*, never called here; the
 * emulator traps such imports and fails if one is reached.)
 * and scripts/ifma-emulate.py loads it into the emulator next to examples/ifma_emulate, to run
 * crypto_mb's 8-lane modular exponentiation (mbx_exp1024_mb8 ... mbx_exp4096_mb8) on the same
 * case inputs as kae's IFMA kernel and count the instructions it executes.
 *
 * Three plain C-ABI functions, called one after the other by the emulator (System V ABI):
 * - kae_crypto_mb_load(m, base, exp, exp_bits, limbs, mod_bits): takes a case as
 *   kae_ifma_emulate_entry does (m, base: `limbs` rows of eight 52-bit limbs, limb j of lane l
 *   at [j * 8 + l]; exp: ceil(exp_bits / 64) rows of eight 64-bit words), converts it to
 *   crypto_mb's layout (per lane, little-endian 64-bit words), picks the function for mod_bits
 *   (kae's size classes 1024 and 2048 have one; mbx_expNNNN_mb8 takes mod_bits with
 *   ceil(mod_bits / 52) = NNNN / 52 rounded up, e.g. 20 limbs for 1024: 512 and 1536 have none),
 *   checks that crypto_mb sees the AVX-512 IFMA feature set in cpuid/xgetbv, and makes crypto_mb
 *   bind its CPU dispatch (first calls of mbx_exp_BufferSize and of the function, the latter
 *   with null arguments), so none of that is in the counted call. Returns LOAD_* below.
 *   The feature check: crypto_mb runs its AVX-512 code (k1_*) only when mbx_get_cpu_features()
 *   (cpuid, xgetbv) has all of MBX_AVX512_GENERAL_ISA, AVX512_VBMI2 included. BochsCPU's CPU
 *   reports AVX512F/BW/DQ/IFMA/VBMI but not VBMI2, which crypto_mb (this build) asks for but
 *   never executes (no vpshld/vpshrd/vpcompress/vpexpand in it; an instruction the emulator
 *   lacks would fault, a FAIL). So when VBMI2 is the only bit missing, it is added with
 *   crypto_mb's public mbx_set_cpu_features, and kae_crypto_mb_forced() says so; any other
 *   missing bit: LOAD_NO_AVX512.
 * - kae_crypto_mb_exp(): the counted call: the chosen mbx_expNNNN_mb8 on the loaded inputs,
 *   with a work buffer of mbx_exp_BufferSize(mod_bits) bytes. Returns its mbx_status
 *   (0: all eight lanes ok). One mod_bits for the eight lanes is its contract: a lane whose
 *   modulus is much narrower (the random cases' lanes 6 and 7) gets a wrong result, with
 *   status 0; ifma-emulate.py compares only the lanes whose modulus has mod_bits bits.
 * - kae_crypto_mb_store(out, limbs): the eight results as `limbs` rows of eight 52-bit limbs
 *   (kae's layout), for the comparison with the case's expected results.
 * kae_crypto_mb_features(): mbx_get_cpu_features() as detected, before any change;
 * kae_crypto_mb_forced(): the bits added with mbx_set_cpu_features (0: none).
 * No allocation: static buffers, sized for moduli up to 4096 bits.
 */
#include <stddef.h>
#include <crypto_mb/cpu_features.h>
#include <crypto_mb/exp.h>

enum {
    LOAD_OK = 0,
    LOAD_NO_FUNCTION = 1, /* crypto_mb has no function for this modulus size */
    LOAD_NO_AVX512 = 2,   /* crypto_mb does not see AVX-512 IFMA (and the rest of its set) */
    LOAD_TOO_LARGE = 3,   /* beyond the static buffers */
    LOAD_BAD_ARGS = 4,    /* exp_bits out of range, limbs too few for mod_bits */
};

#define LANES 8
#define MAX_WORDS 66     /* 4096 bits and a little room: 64-bit words per lane */
#define MAX_LIMBS 80     /* 52-bit limbs per lane (79 at 4096 bits) */
#define WORK_BYTES (256 * 1024)
#define MASK52 ((1ULL << 52) - 1)

typedef mbx_status exp_fn(int64u *const out_pa[8], const int64u *const base_pa[8],
                          const int64u *const exp_pa[8], int exp_bits,
                          const int64u *const mod_pa[8], int mod_bits, int8u *pBuffer,
                          int bufferLen);

static int64u mod_w[LANES][MAX_WORDS], base_w[LANES][MAX_WORDS], exp_w[LANES][MAX_WORDS];
static int64u out_w[LANES][MAX_WORDS];
static int8u work[WORK_BYTES] __attribute__((aligned(64)));

static int64u detected, forced; /* features: from cpuid/xgetbv; added */

static struct {
    exp_fn *fn;
    int exp_bits, mod_bits, work_len;
    int64u *out[LANES];
    const int64u *base[LANES], *exp[LANES], *mod[LANES];
} call;

/* Lane `lane` of `limbs` interleaved 52-bit limbs into `words` 64-bit words. */
static void limbs_to_words(const int64u *src, size_t limbs, int lane, int64u *w, size_t words)
{
    for (size_t k = 0; k < words; k++)
        w[k] = 0;
    for (size_t j = 0; j < limbs; j++) {
        int64u v = src[j * LANES + lane] & MASK52;
        size_t bit = 52 * j, k = bit / 64, s = bit % 64;
        if (k < words)
            w[k] |= v << s;
        if (s > 12 && k + 1 < words)
            w[k + 1] |= v >> (64 - s);
    }
}

/* `words` 64-bit words into lane `lane` of `limbs` interleaved 52-bit limbs. */
static void words_to_limbs(const int64u *w, size_t words, int lane, int64u *dst, size_t limbs)
{
    for (size_t j = 0; j < limbs; j++) {
        size_t bit = 52 * j, k = bit / 64, s = bit % 64;
        int64u v = k < words ? w[k] >> s : 0;
        if (s > 12 && k + 1 < words)
            v |= w[k + 1] << (64 - s);
        dst[j * LANES + lane] = v & MASK52;
    }
}

int kae_crypto_mb_load(const int64u *m, const int64u *base, const int64u *exp, size_t exp_bits,
                       size_t limbs, size_t mod_bits)
{
    switch (mod_bits) {
    case 1024: call.fn = mbx_exp1024_mb8; break;
    case 2048: call.fn = mbx_exp2048_mb8; break;
    case 3072: call.fn = mbx_exp3072_mb8; break;
    case 4096: call.fn = mbx_exp4096_mb8; break;
    default: call.fn = NULL; return LOAD_NO_FUNCTION;
    }
    if (limbs > MAX_LIMBS)
        return LOAD_TOO_LARGE;
    if (exp_bits == 0 || exp_bits > mod_bits || 52 * limbs < mod_bits)
        return LOAD_BAD_ARGS;
    /* The feature set crypto_mb's dispatcher asks for its AVX-512 code (cpu_features.h),
     * before the first dispatch (it is bound once). */
    if (!detected)
        detected = mbx_get_cpu_features();
    int64u missing = MBX_AVX512_GENERAL_ISA & ~detected;
    if (missing & ~(int64u)mbcpCPUID_AVX512VBMI2)
        return LOAD_NO_AVX512;
    if (missing && !forced) {
        forced = missing;
        mbx_set_cpu_features(detected | forced);
    }
    int len = mbx_exp_BufferSize((int)mod_bits);
    if (len <= 0 || len > WORK_BYTES)
        return LOAD_TOO_LARGE;

    size_t exp_rows = (exp_bits + 63) / 64;
    for (int l = 0; l < LANES; l++) {
        limbs_to_words(m, limbs, l, mod_w[l], MAX_WORDS);
        limbs_to_words(base, limbs, l, base_w[l], MAX_WORDS);
        for (size_t k = 0; k < MAX_WORDS; k++) {
            exp_w[l][k] = k < exp_rows ? exp[k * LANES + l] : 0;
            out_w[l][k] = 0;
        }
        call.out[l] = out_w[l];
        call.base[l] = base_w[l];
        call.exp[l] = exp_w[l];
        call.mod[l] = mod_w[l];
    }
    call.exp_bits = (int)exp_bits;
    call.mod_bits = (int)mod_bits;
    call.work_len = len;
    /* Binds the dispatch of the function (a null out array: it returns at once). */
    (void)call.fn(NULL, call.base, call.exp, call.exp_bits, call.mod, call.mod_bits, work,
                  call.work_len);
    return LOAD_OK;
}

int64u kae_crypto_mb_exp(void)
{
    return call.fn(call.out, call.base, call.exp, call.exp_bits, call.mod, call.mod_bits, work,
                   call.work_len);
}

void kae_crypto_mb_store(int64u *out, size_t limbs)
{
    for (int l = 0; l < LANES; l++)
        words_to_limbs(out_w[l], MAX_WORDS, l, out, limbs);
}

int64u kae_crypto_mb_features(void)
{
    return detected ? detected : mbx_get_cpu_features();
}

int64u kae_crypto_mb_forced(void)
{
    return forced;
}

/* Not run: the functions above are what the emulator calls. */
int main(void)
{
    return 0;
}

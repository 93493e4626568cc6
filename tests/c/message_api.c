/*
 * OpenSSL 3.4+ message-signature API and the RSA KEM (RSASVE) through kae.
 * Built and run by scripts/compat.sh (group message-api) against each 3.4+ core's
 * own headers and libcrypto:
 *
 *   message_api MODULE_DIR
 *
 * Loads kae (from MODULE_DIR) and the default provider into the default library
 * context, generates an RSA-2048 key with kae (when that fails: records the failure and
 * carries on with a default-provider key imported into kae), then:
 *   - sign-message:   EVP_PKEY_sign_message_init with EVP_SIGNATURE_fetch(NULL,
 *                     "RSA-SHA256", "provider=kae") + update (two pieces) + final;
 *   - verify-message: EVP_PKEY_verify_message_init with kae's RSA-SHA256 +
 *                     EVP_PKEY_CTX_set_signature + update + final; a changed message
 *                     must not verify;
 *   - cross-verify:   the same signature verified by the default provider
 *                     (EVP_DigestVerify, SHA-256, PKCS#1), and a default-provider
 *                     RSA-SHA256 message signature verified by kae;
 *   - kem:            EVP_PKEY_encapsulate_init + EVP_PKEY_CTX_set_kem_op("RSASVE") +
 *                     EVP_PKEY_encapsulate with kae (propquery provider=kae), then
 *                     EVP_PKEY_decapsulate with kae: same secret;
 *   - kem-cross:      encapsulated by the default provider, decapsulated by kae, and
 *                     encapsulated by kae, decapsulated by the default provider.
 * Prints "RESULT <name> ok" or "RESULT <name> FAIL <reason>" per check and
 * "PROVIDER <op> <name>" for the implementation that ran; exits 0 only when
 * every check passed.
 */
#include <stdio.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <openssl/rsa.h>

#if OPENSSL_VERSION_NUMBER < 0x30400000L
#error "message_api.c needs OpenSSL 3.4 or later (EVP_PKEY_sign_message_init)"
#endif

static int failures;

static void errors_to(char *buf, size_t n)
{
    unsigned long e;
    size_t used = 0;
    buf[0] = '\0';
    while ((e = ERR_get_error()) != 0 && used + 2 < n) {
        char one[256];
        ERR_error_string_n(e, one, sizeof(one));
        used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? " | " : "", one);
    }
    if (buf[0] == '\0')
        snprintf(buf, n, "(no OpenSSL error queued)");
}

static void result(const char *name, int ok, const char *why)
{
    char errs[1024];
    if (ok) {
        printf("RESULT %s ok\n", name);
        ERR_clear_error();
    } else {
        errors_to(errs, sizeof(errs));
        printf("RESULT %s FAIL %s: %s\n", name, why, errs);
        failures++;
    }
    fflush(stdout);
}

static const char *prov_name(const OSSL_PROVIDER *p)
{
    return p ? OSSL_PROVIDER_get0_name(p) : "(none)";
}

static const unsigned char part1[] = "kae compat: message API, ";
static const unsigned char part2[] = "signed in two updates";

/* sign_message with signature algorithm `alg` (already fetched); 1 on success. */
static int sign_msg(EVP_PKEY *key, EVP_SIGNATURE *alg, const char *propq,
                    unsigned char *sig, size_t *siglen)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, key, propq);
    size_t cap = *siglen;
    int ok = c != NULL
        && EVP_PKEY_sign_message_init(c, alg, NULL) > 0
        && EVP_PKEY_sign_message_update(c, part1, sizeof(part1) - 1) > 0
        && EVP_PKEY_sign_message_update(c, part2, sizeof(part2) - 1) > 0
        && EVP_PKEY_sign_message_final(c, NULL, siglen) > 0
        && *siglen <= cap
        && EVP_PKEY_sign_message_final(c, sig, siglen) > 0;
    EVP_PKEY_CTX_free(c);
    return ok;
}

/* verify_message; returns EVP_PKEY_verify_message_final's result (1 = good). */
static int verify_msg(EVP_PKEY *key, EVP_SIGNATURE *alg, const char *propq,
                      const unsigned char *sig, size_t siglen, int tamper)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, key, propq);
    int r = -1;
    if (c != NULL
        && EVP_PKEY_verify_message_init(c, alg, NULL) > 0
        && EVP_PKEY_CTX_set_signature(c, sig, siglen) > 0
        && EVP_PKEY_verify_message_update(c, part1, sizeof(part1) - 1) > 0
        && EVP_PKEY_verify_message_update(c, part2, sizeof(part2) - (tamper ? 2 : 1)) > 0)
        r = EVP_PKEY_verify_message_final(c);
    EVP_PKEY_CTX_free(c);
    return r;
}

/* Default provider: EVP_DigestVerify with SHA-256 (PKCS#1 v1.5). */
static int digest_verify_default(EVP_PKEY *key, const unsigned char *sig, size_t siglen)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    EVP_PKEY_CTX *pc = NULL;
    unsigned char msg[sizeof(part1) + sizeof(part2)];
    size_t n = 0;
    int r = -1;
    memcpy(msg, part1, sizeof(part1) - 1);
    n += sizeof(part1) - 1;
    memcpy(msg + n, part2, sizeof(part2) - 1);
    n += sizeof(part2) - 1;
    if (m != NULL
        && EVP_DigestVerifyInit_ex(m, &pc, "SHA256", NULL, "provider=default", key, NULL) > 0) {
        printf("PROVIDER digest-verify %s\n", prov_name(EVP_PKEY_CTX_get0_provider(pc)));
        r = EVP_DigestVerify(m, sig, siglen, msg, n);
    }
    EVP_MD_CTX_free(m);
    return r;
}

static int encap(EVP_PKEY *key, const char *propq, const char *who, unsigned char *wrapped,
                 size_t *wlen, unsigned char *secret, size_t *slen)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, key, propq);
    size_t wcap = *wlen, scap = *slen;
    int ok = c != NULL
        && EVP_PKEY_encapsulate_init(c, NULL) > 0
        && EVP_PKEY_CTX_set_kem_op(c, "RSASVE") > 0
        && EVP_PKEY_encapsulate(c, NULL, wlen, NULL, slen) > 0
        && *wlen <= wcap && *slen <= scap
        && EVP_PKEY_encapsulate(c, wrapped, wlen, secret, slen) > 0;
    if (c != NULL)
        printf("PROVIDER encapsulate(%s) %s\n", who, prov_name(EVP_PKEY_CTX_get0_provider(c)));
    EVP_PKEY_CTX_free(c);
    return ok;
}

static int decap(EVP_PKEY *key, const char *propq, const char *who,
                 const unsigned char *wrapped, size_t wlen, unsigned char *secret, size_t *slen)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, key, propq);
    size_t scap = *slen;
    int ok = c != NULL
        && EVP_PKEY_decapsulate_init(c, NULL) > 0
        && EVP_PKEY_CTX_set_kem_op(c, "RSASVE") > 0
        && EVP_PKEY_decapsulate(c, NULL, slen, wrapped, wlen) > 0
        && *slen <= scap
        && EVP_PKEY_decapsulate(c, secret, slen, wrapped, wlen) > 0;
    if (c != NULL)
        printf("PROVIDER decapsulate(%s) %s\n", who, prov_name(EVP_PKEY_CTX_get0_provider(c)));
    EVP_PKEY_CTX_free(c);
    return ok;
}

/* The same key in kae's key management (EVP_PKEY_todata / EVP_PKEY_fromdata). */
static EVP_PKEY *into_kae(EVP_PKEY *k)
{
    OSSL_PARAM *params = NULL;
    EVP_PKEY *out = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, "RSA", "provider=kae");
    if (c == NULL || EVP_PKEY_todata(k, EVP_PKEY_KEYPAIR, &params) <= 0
        || EVP_PKEY_fromdata_init(c) <= 0
        || EVP_PKEY_fromdata(c, &out, EVP_PKEY_KEYPAIR, params) <= 0)
        out = NULL;
    OSSL_PARAM_free(params);
    EVP_PKEY_CTX_free(c);
    return out;
}

int main(int argc, char **argv)
{
    OSSL_PROVIDER *kae, *dflt;
    EVP_PKEY_CTX *gc;
    EVP_PKEY *key = NULL;
    EVP_SIGNATURE *kae_sig, *dflt_sig;
    unsigned char sig[1024], sig2[1024];
    size_t siglen = sizeof(sig), sig2len = sizeof(sig2);
    int r;

    if (argc != 2) {
        fprintf(stderr, "usage: %s MODULE_DIR\n", argv[0]);
        return 2;
    }
    printf("LIBCRYPTO %s (built against %s)\n", OpenSSL_version(OPENSSL_VERSION),
           OPENSSL_VERSION_TEXT);
    if (!OSSL_PROVIDER_set_default_search_path(NULL, argv[1])
        || (kae = OSSL_PROVIDER_load(NULL, "kae")) == NULL
        || (dflt = OSSL_PROVIDER_load(NULL, "default")) == NULL) {
        result("load-providers", 0, "loading kae and default");
        return 1;
    }
    result("load-providers", 1, "");

    /* RSA-2048 key generated by kae. */
    gc = EVP_PKEY_CTX_new_from_name(NULL, "RSA", "provider=kae");
    r = gc != NULL && EVP_PKEY_keygen_init(gc) > 0
        && EVP_PKEY_CTX_set_rsa_keygen_bits(gc, 2048) > 0 && EVP_PKEY_generate(gc, &key) > 0;
    EVP_PKEY_CTX_free(gc);
    if (r)
        printf("PROVIDER keygen %s\n", prov_name(EVP_PKEY_get0_provider(key)));
    r = r && strcmp(prov_name(EVP_PKEY_get0_provider(key)), "kae") == 0;
    result("keygen", r, "RSA-2048 key generation by kae");
    if (!r) {
        /* Carry on with a default-provider key moved into kae, so the other checks run. */
        EVP_PKEY *dk = NULL;
        EVP_PKEY_free(key);
        key = NULL;
        gc = EVP_PKEY_CTX_new_from_name(NULL, "RSA", "provider=default");
        if (gc != NULL && EVP_PKEY_keygen_init(gc) > 0
            && EVP_PKEY_CTX_set_rsa_keygen_bits(gc, 2048) > 0 && EVP_PKEY_generate(gc, &dk) > 0)
            key = into_kae(dk);
        EVP_PKEY_CTX_free(gc);
        EVP_PKEY_free(dk);
        r = key != NULL && strcmp(prov_name(EVP_PKEY_get0_provider(key)), "kae") == 0;
        result("import-into-kae", r, "default-provider key imported into kae (fromdata)");
        if (!r)
            return 1;
        printf("(continuing with a default-provider key imported into kae)\n");
    }

    /* ---- message signatures ---- */
    kae_sig = EVP_SIGNATURE_fetch(NULL, "RSA-SHA256", "provider=kae");
    dflt_sig = EVP_SIGNATURE_fetch(NULL, "RSA-SHA256", "provider=default");
    result("fetch-RSA-SHA256-kae", kae_sig != NULL,
           "EVP_SIGNATURE_fetch(NULL, \"RSA-SHA256\", \"provider=kae\"): kae does not offer it");
    if (dflt_sig == NULL)
        result("fetch-RSA-SHA256-default", 0, "the default provider has no RSA-SHA256");
    if (kae_sig != NULL) {
        printf("PROVIDER RSA-SHA256 %s\n", prov_name(EVP_SIGNATURE_get0_provider(kae_sig)));
        r = sign_msg(key, kae_sig, "provider=kae", sig, &siglen);
        result("sign-message", r, "EVP_PKEY_sign_message_* with kae's RSA-SHA256");
        if (r) {
            result("verify-message", verify_msg(key, kae_sig, "provider=kae", sig, siglen, 0) == 1,
                   "kae did not verify its own message signature");
            result("verify-message-tampered",
                   verify_msg(key, kae_sig, "provider=kae", sig, siglen, 1) == 0,
                   "kae accepted a signature over a changed message");
            result("cross-verify-default", digest_verify_default(key, sig, siglen) == 1,
                   "the default provider did not verify kae's message signature");
        }
        if (dflt_sig != NULL) {
            r = sign_msg(key, dflt_sig, "provider=default", sig2, &sig2len);
            result("sign-message-default", r, "default provider's RSA-SHA256 sign_message");
            if (r)
                result("cross-verify-kae",
                       verify_msg(key, kae_sig, "provider=kae", sig2, sig2len, 0) == 1,
                       "kae did not verify the default provider's message signature");
        }
    }
    EVP_SIGNATURE_free(kae_sig);
    EVP_SIGNATURE_free(dflt_sig);
    ERR_clear_error();

    /* ---- RSA KEM (RSASVE) ---- */
    {
        unsigned char w[512], s[512], s2[512];
        size_t wl = sizeof(w), sl = sizeof(s), sl2 = sizeof(s2);
        EVP_KEM *k = EVP_KEM_fetch(NULL, "RSA", "provider=kae");
        result("fetch-KEM-RSA-kae", k != NULL,
               "EVP_KEM_fetch(NULL, \"RSA\", \"provider=kae\"): kae does not offer the RSA KEM");
        EVP_KEM_free(k);
        ERR_clear_error();

        r = encap(key, "provider=kae", "kae", w, &wl, s, &sl);
        result("kem-encapsulate", r, "RSASVE encapsulate with provider=kae");
        if (r) {
            r = decap(key, "provider=kae", "kae", w, wl, s2, &sl2);
            result("kem-decapsulate", r, "RSASVE decapsulate with provider=kae");
            if (r)
                result("kem-same-secret", sl == sl2 && memcmp(s, s2, sl) == 0,
                       "decapsulated secret differs from the encapsulated one");
            /* kae's encapsulation opened by the default provider. */
            sl2 = sizeof(s2);
            r = decap(key, "provider=default", "default", w, wl, s2, &sl2);
            result("kem-cross-default-decap", r && sl == sl2 && memcmp(s, s2, sl) == 0,
                   "the default provider did not recover kae's secret");
        }
        /* The default provider's encapsulation opened by kae. */
        wl = sizeof(w);
        sl = sizeof(s);
        sl2 = sizeof(s2);
        r = encap(key, "provider=default", "default", w, &wl, s, &sl);
        result("kem-encapsulate-default", r, "RSASVE encapsulate with provider=default");
        if (r) {
            r = decap(key, "provider=kae", "kae", w, wl, s2, &sl2);
            result("kem-cross-kae-decap", r && sl == sl2 && memcmp(s, s2, sl) == 0,
                   "kae did not recover the default provider's secret");
        }
    }

    EVP_PKEY_free(key);
    OSSL_PROVIDER_unload(kae);
    OSSL_PROVIDER_unload(dflt);
    printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

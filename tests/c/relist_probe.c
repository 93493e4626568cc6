/*
 * Probe run in a fresh process by tests/security.rs (relisted_algorithms_never_get_kae_keys),
 * under valgrind. OPENSSL_CONF activates kae (preferred) and the default provider.
 *
 *   relist_probe PUB.pem KEY.pem
 *
 * Prints one "ALG <op> <owner> <names>" line for every algorithm kae lists for operation ids
 * 1..40 (owner: the file that holds the implementation's first function), then exercises the
 * RSA operations with keys decoded from PEM (so the keys are kae's) and prints
 * "RESULT <what> ok" or "RESULT <what> error <reason>". The RSA KEM (RSASVE) counts as ok
 * only when it ran in kae's own KEM. Exit 0 unless the probe itself fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/provider.h>
#include <openssl/rsa.h>

static OSSL_PROVIDER *kae;

static int find_kae(OSSL_PROVIDER *p, void *arg)
{
    (void)arg;
    if (strcmp(OSSL_PROVIDER_get0_name(p), "kae") == 0)
        kae = p;
    return 1;
}

static const char *owner(const OSSL_DISPATCH *d)
{
    Dl_info info;
    for (; d != NULL && d->function_id != 0; d++) {
        if (d->function != NULL && dladdr((void *)d->function, &info) && info.dli_fname) {
            const char *slash = strrchr(info.dli_fname, '/');
            return slash ? slash + 1 : info.dli_fname;
        }
    }
    return "?";
}

static void result(const char *what, int ok)
{
    if (ok) {
        printf("RESULT %s ok\n", what);
    } else {
        unsigned long e = ERR_peek_last_error();
        const char *r = ERR_reason_error_string(e);
        printf("RESULT %s error %s\n", what, r ? r : (e ? "(no reason)" : "(empty queue)"));
    }
    ERR_clear_error();
    fflush(stdout);
}

static EVP_PKEY *read_key(const char *path, int private)
{
    /* Decoded with kae's decoders: the key object is kae's (keymgmt load). */
    BIO *b = BIO_new_file(path, "r");
    EVP_PKEY *k;
    if (b == NULL)
        return NULL;
    k = private ? PEM_read_bio_PrivateKey_ex(b, NULL, NULL, NULL, NULL, "provider=kae")
                : PEM_read_bio_PUBKEY_ex(b, NULL, NULL, NULL, NULL, "provider=kae");
    BIO_free(b);
    return k;
}

/* The same key moved into kae's key management with EVP_PKEY_todata / fromdata. */
static EVP_PKEY *into_kae(EVP_PKEY *k, int selection)
{
    OSSL_PARAM *params = NULL;
    EVP_PKEY *out = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, "RSA", "provider=kae");
    if (c == NULL || EVP_PKEY_todata(k, selection, &params) <= 0
        || EVP_PKEY_fromdata_init(c) <= 0 || EVP_PKEY_fromdata(c, &out, selection, params) <= 0)
        out = NULL;
    OSSL_PARAM_free(params);
    EVP_PKEY_CTX_free(c);
    return out;
}

/* 1 when the operation set up on c runs in kae; otherwise an error naming the provider. */
static int ran_in_kae(EVP_PKEY_CTX *c)
{
    const OSSL_PROVIDER *p = EVP_PKEY_CTX_get0_provider(c);
    const char *name = p ? OSSL_PROVIDER_get0_name(p) : "(none)";
    if (strcmp(name, "kae") == 0)
        return 1;
    ERR_raise_data(ERR_LIB_USER, ERR_R_INTERNAL_ERROR, "KEM ran in provider %s", name);
    return 0;
}

/* kae has its own RSA KEM: with kae preferred, both steps must succeed in kae itself. */
static void kem(EVP_PKEY *pub, EVP_PKEY *priv)
{
    unsigned char wrapped[1024], secret[1024], secret2[1024];
    size_t wlen = sizeof(wrapped), slen = sizeof(secret), slen2 = sizeof(secret2);
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, pub, NULL);
    int ok = c != NULL && EVP_PKEY_encapsulate_init(c, NULL) > 0 && ran_in_kae(c)
        && EVP_PKEY_CTX_set_kem_op(c, "RSASVE") > 0
        && EVP_PKEY_encapsulate(c, wrapped, &wlen, secret, &slen) > 0;
    result("kem-encapsulate", ok);
    EVP_PKEY_CTX_free(c);
    if (!ok)
        return;
    c = EVP_PKEY_CTX_new_from_pkey(NULL, priv, NULL);
    ok = c != NULL && EVP_PKEY_decapsulate_init(c, NULL) > 0 && ran_in_kae(c)
        && EVP_PKEY_CTX_set_kem_op(c, "RSASVE") > 0
        && EVP_PKEY_decapsulate(c, secret2, &slen2, wrapped, wlen) > 0
        && slen2 == slen && memcmp(secret, secret2, slen) == 0;
    result("kem-decapsulate-matches", ok);
    EVP_PKEY_CTX_free(c);
}

static void sign_verify(EVP_PKEY *pub, EVP_PKEY *priv)
{
    unsigned char sig[1024];
    size_t siglen = sizeof(sig);
    const unsigned char msg[] = "relisting probe";
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    int ok = EVP_DigestSignInit_ex(m, NULL, "SHA256", NULL, NULL, priv, NULL) > 0
        && EVP_DigestSign(m, sig, &siglen, msg, sizeof(msg)) > 0;
    result("digest-sign", ok);
    EVP_MD_CTX_free(m);
    m = EVP_MD_CTX_new();
    ok = ok && EVP_DigestVerifyInit_ex(m, NULL, "SHA256", NULL, NULL, pub, NULL) > 0
        && EVP_DigestVerify(m, sig, siglen, msg, sizeof(msg)) > 0;
    result("digest-verify", ok);
    EVP_MD_CTX_free(m);
}

static void cipher(EVP_PKEY *pub, EVP_PKEY *priv)
{
    unsigned char ct[1024], pt[1024];
    size_t ctlen = sizeof(ct), ptlen = sizeof(pt);
    const unsigned char msg[] = "secret";
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, pub, NULL);
    int ok = c != NULL && EVP_PKEY_encrypt_init(c) > 0
        && EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_OAEP_PADDING) > 0
        && EVP_PKEY_encrypt(c, ct, &ctlen, msg, sizeof(msg)) > 0;
    EVP_PKEY_CTX_free(c);
    c = EVP_PKEY_CTX_new_from_pkey(NULL, priv, NULL);
    ok = ok && c != NULL && EVP_PKEY_decrypt_init(c) > 0
        && EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_OAEP_PADDING) > 0
        && EVP_PKEY_decrypt(c, pt, &ptlen, ct, ctlen) > 0
        && ptlen == sizeof(msg) && memcmp(pt, msg, ptlen) == 0;
    result("oaep-roundtrip", ok);
    EVP_PKEY_CTX_free(c);
}

static void encode(EVP_PKEY *pub, EVP_PKEY *priv)
{
    BIO *b = BIO_new(BIO_s_mem());
    result("pem-encode-public", PEM_write_bio_PUBKEY(b, pub) > 0);
    result("pem-encode-private", PEM_write_bio_PrivateKey(b, priv, NULL, NULL, 0, NULL, NULL) > 0);
    result("text-encode", EVP_PKEY_print_private(b, priv, 0, NULL) > 0);
    BIO_free(b);
}

int main(int argc, char **argv)
{
    EVP_PKEY *pub, *priv;
    int op;

    if (argc != 3) {
        fprintf(stderr, "usage: relist_probe PUB.pem KEY.pem\n");
        return 2;
    }
    /* Keys first, from PEM, before any other fetch (a fetch from the default provider could
     * hide a re-listed implementation through the method cache). */
    pub = read_key(argv[1], 0);
    priv = read_key(argv[2], 1);
    if (pub == NULL || priv == NULL) {
        ERR_print_errors_fp(stderr);
        return 3;
    }
    for (int round = 0; round < 2; round++) {
        printf("KEYPROV %s %s\n", OSSL_PROVIDER_get0_name(EVP_PKEY_get0_provider(pub)),
               OSSL_PROVIDER_get0_name(EVP_PKEY_get0_provider(priv)));
        fflush(stdout);
        kem(pub, priv);
        sign_verify(pub, priv);
        cipher(pub, priv);
        encode(pub, priv);
        if (round == 0) {
            EVP_PKEY *kpub = into_kae(pub, EVP_PKEY_PUBLIC_KEY);
            EVP_PKEY *kpriv = into_kae(priv, EVP_PKEY_KEYPAIR);
            EVP_PKEY_free(pub);
            EVP_PKEY_free(priv);
            pub = kpub;
            priv = kpriv;
            if (pub == NULL || priv == NULL) {
                ERR_print_errors_fp(stderr);
                return 5;
            }
        }
    }

    OSSL_PROVIDER_do_all(NULL, find_kae, NULL);
    if (kae == NULL) {
        fprintf(stderr, "kae is not loaded\n");
        return 4;
    }
    for (op = 1; op <= 40; op++) {
        int no_cache = 0;
        const OSSL_ALGORITHM *start = OSSL_PROVIDER_query_operation(kae, op, &no_cache), *a;
        for (a = start; a != NULL && a->algorithm_names != NULL; a++)
            printf("ALG %d %s %s\n", op, owner(a->implementation), a->algorithm_names);
        if (start != NULL)
            OSSL_PROVIDER_unquery_operation(kae, op, start);
    }
    EVP_PKEY_free(pub);
    EVP_PKEY_free(priv);
    return 0;
}

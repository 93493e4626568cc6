/*
 * The security review's RSA KEM reproduction, run in a fresh process by tests/kem.rs
 * (pem_key_with_kae_preferred_uses_kaes_kem). OPENSSL_CONF activates kae and the default
 * provider with kae preferred (default_properties = ?provider=kae).
 *
 *   kem_repro KEY.pem
 *
 * Two rounds: the key as read from PEM with "?provider=kae" (the review's reproduction: the
 * preferred KEM gets the key exported to its provider's key management, which handed kae's
 * key object to the re-listed default KEM), and the same key moved into kae's key management
 * (EVP_PKEY_todata / fromdata). Each round prints "ROUND <label>", "KEYPROV <provider>",
 * encapsulates with RSASVE ("ENCAP ok <provider of the KEM> <ctlen> <secretlen>"), then
 * decapsulates with the default provider ("DECAP ok default" when the secrets match). Any
 * failure prints the step and the error queue and exits non-zero.
 */
#include <stdio.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/provider.h>
#include <openssl/core.h>

static int fail(const char *what)
{
    printf("FAIL %s\n", what);
    ERR_print_errors_fp(stdout);
    return 1;
}

static const char *ctx_provider(EVP_PKEY_CTX *c)
{
    const OSSL_PROVIDER *p = EVP_PKEY_CTX_get0_provider(c);
    return p ? OSSL_PROVIDER_get0_name(p) : "(none)";
}

/* The same key moved into kae's key management with EVP_PKEY_todata / fromdata. */
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

/* One round: encapsulate with the preferred KEM, decapsulate with the default provider.
 * Returns 0 on success. */
static int round_with(EVP_PKEY *key, const char *label)
{
    unsigned char ct[2048], secret[2048], secret2[2048];
    size_t ctlen = sizeof(ct), slen = sizeof(secret), slen2 = sizeof(secret2);
    EVP_PKEY_CTX *c;

    printf("ROUND %s\n", label);
    printf("KEYPROV %s\n", OSSL_PROVIDER_get0_name(EVP_PKEY_get0_provider(key)));
    c = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
    if (c == NULL || EVP_PKEY_encapsulate_init(c, NULL) <= 0)
        return fail("encapsulate_init");
    if (EVP_PKEY_CTX_set_kem_op(c, "RSASVE") <= 0)
        return fail("set_kem_op");
    if (EVP_PKEY_encapsulate(c, ct, &ctlen, secret, &slen) <= 0)
        return fail("encapsulate");
    printf("ENCAP ok %s %zu %zu\n", ctx_provider(c), ctlen, slen);
    EVP_PKEY_CTX_free(c);

    c = EVP_PKEY_CTX_new_from_pkey(NULL, key, "provider=default");
    if (c == NULL || EVP_PKEY_decapsulate_init(c, NULL) <= 0)
        return fail("decapsulate_init (default)");
    if (EVP_PKEY_CTX_set_kem_op(c, "RSASVE") <= 0)
        return fail("set_kem_op (default)");
    if (EVP_PKEY_decapsulate(c, secret2, &slen2, ct, ctlen) <= 0)
        return fail("decapsulate (default)");
    if (slen2 != slen || memcmp(secret, secret2, slen) != 0)
        return fail("the secrets differ");
    printf("DECAP ok %s\n", ctx_provider(c));
    EVP_PKEY_CTX_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    EVP_PKEY *key, *kkey;
    BIO *b;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: kem_repro KEY.pem\n");
        return 2;
    }
    b = BIO_new_file(argv[1], "r");
    key = b ? PEM_read_bio_PrivateKey_ex(b, NULL, NULL, NULL, NULL, "?provider=kae") : NULL;
    BIO_free(b);
    if (key == NULL)
        return fail("read key");
    kkey = into_kae(key);
    if (kkey == NULL)
        return fail("key into kae");
    rc = round_with(key, "pem") != 0 || round_with(kkey, "kae-key") != 0;
    EVP_PKEY_free(key);
    EVP_PKEY_free(kkey);
    return rc;
}

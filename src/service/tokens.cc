#include "service/tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

namespace tessera {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

}  // namespace

Result<std::string> NewToken() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return Status::Error("RAND_bytes failed: no randomness for a token");
  return "tsr_" + Hex(bytes, sizeof bytes);
}

// SHA-256 fetched once (EVP_sha256() in EVP_Digest looks the algorithm up again on every call, under a
// lock), hashed on a context kept per thread (every request hashes its token).
std::string Sha256Hex(std::string_view text) {
  static EVP_MD* const fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  const EVP_MD* md_type = fetched != nullptr ? fetched : EVP_sha256();
  thread_local std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (ctx && EVP_DigestInit_ex2(ctx.get(), md_type, nullptr) == 1 &&
      EVP_DigestUpdate(ctx.get(), text.data(), text.size()) == 1 && EVP_DigestFinal_ex(ctx.get(), md, &n) == 1)
    return Hex(md, n);
  n = 0;
  EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr);
  return Hex(md, n);
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tessera

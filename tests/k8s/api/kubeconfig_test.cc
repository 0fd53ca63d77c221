// Kubeconfig parsing: the current context's server, CA, token and namespace; errors name the field.
#include "k8s/api/kubeconfig.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace tessera {
namespace {

const char* kConfig = R"(apiVersion: v1
kind: Config
clusters:
- name: other
  cluster: {server: "https://10.0.0.1:6443"}
- name: fake
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
users:
- name: tessera
  user: {token: abc123}
contexts:
- name: fake
  context: {cluster: fake, user: tessera, namespace: tessera-system}
current-context: fake
)";

TEST(Kubeconfig, ReadsTheCurrentContext) {
  auto k = ParseKubeconfig(kConfig, "kc", ".");
  ASSERT_TRUE(k.ok()) << k.error();
  EXPECT_EQ(k->server, "https://127.0.0.1:6443");
  EXPECT_EQ(k->ca_pem, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(k->Token(), "abc123");
  EXPECT_EQ(k->ns, "tessera-system");
  EXPECT_FALSE(k->insecure);
}

TEST(Kubeconfig, ErrorsNameTheField) {
  std::string text = kConfig;
  auto missing = ParseKubeconfig(
      std::string(text).replace(text.find("current-context: fake"), 21, "current-context: x"), "kc", ".");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("no context named 'x'"), std::string::npos) << missing.error();
  auto bad_ca = ParseKubeconfig(std::string(text).replace(text.find("LS0t"), 4, "$$$$"), "kc", ".");
  ASSERT_FALSE(bad_ca.ok());
  EXPECT_NE(bad_ca.error().find("certificate-authority-data"), std::string::npos) << bad_ca.error();
  EXPECT_FALSE(ParseKubeconfig("[1, 2", "kc", ".").ok());
  EXPECT_FALSE(ParseKubeconfig("- a", "kc", ".").ok());
}

TEST(Kubeconfig, ATokenFileIsReReadOnRotation) {
  char dir[] = "/tmp/tessera-kc-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string token = std::string(dir) + "/token";
  std::ofstream(token) << "first\n";
  std::string text = kConfig;
  text.replace(text.find("{token: abc123}"), 15, "{tokenFile: token}");
  auto k = ParseKubeconfig(text, "kc", dir);
  ASSERT_TRUE(k.ok()) << k.error();
  EXPECT_EQ(k->Token(), "first");
  std::ofstream(token) << "second\n";
  EXPECT_EQ(k->Token(), "second");
  std::remove(token.c_str());
  rmdir(dir);
}

TEST(Base64, DecodesWithAndWithoutPadding) {
  EXPECT_EQ(*DecodeBase64("aGVsbG8="), "hello");
  EXPECT_EQ(*DecodeBase64("aGVsbG8"), "hello");
  EXPECT_EQ(*DecodeBase64("aGVs\nbG8="), "hello");
  EXPECT_FALSE(DecodeBase64("a$b=").ok());
}

}  // namespace
}  // namespace tessera

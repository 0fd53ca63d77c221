// TrustedProxies and CanonicalAddress: which address a request's limits and audit entries use.
#include "server/client_address.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TrustedProxies ProxiesOf(std::vector<std::string> cidrs) {
  auto p = TrustedProxies::Parse(cidrs);
  EXPECT_TRUE(p.ok()) << p.error();
  return p.ok() ? std::move(p).value() : TrustedProxies();
}

TEST(CanonicalAddress, IPv4IPv6AndMappedForms) {
  EXPECT_EQ(CanonicalAddress("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(CanonicalAddress(" ::ffff:127.0.0.60 "), "127.0.0.60");
  EXPECT_EQ(CanonicalAddress("[2001:DB8:0::1]"), "2001:db8::1");
  EXPECT_EQ(CanonicalAddress("fe80::1%eth0"), "fe80::1");
  EXPECT_EQ(CanonicalAddress("198.51.100.1:8080"), "");
  EXPECT_EQ(CanonicalAddress("unknown"), "");
  EXPECT_EQ(CanonicalAddress("10.0.0"), "");
  EXPECT_EQ(CanonicalAddress(""), "");
}

TEST(TrustedProxies, ParsesCidrsAndRefusesMalformedOnesNamingTheFlag) {
  EXPECT_TRUE(TrustedProxies::Parse({"127.0.0.60/32", "10.0.0.0/8", "2001:db8::/32", "192.0.2.7", "::1", "0.0.0.0/0"}).ok());
  for (const char* bad : {"10.0.0.0/33", "2001:db8::/129", "abc", "10.0.0/8", "10.0.0.0/", "/8", "10.0.0.0/8x",
                          "10.0.0.0/-1", "10.0.0.0/+8", "", "fe80::1%eth0/64", "10.0.0.0/08 "}) {
    auto p = TrustedProxies::Parse({"127.0.0.1", bad});
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error().find("--trusted-proxy"), std::string::npos) << p.error();
    EXPECT_NE(p.error().find(std::string("'") + bad + "'"), std::string::npos) << p.error();
  }
}

TEST(TrustedProxies, ContainsByPrefixPerFamily) {
  TrustedProxies p = ProxiesOf({"10.0.0.0/8", "172.16.0.0/12", "2001:db8::/32", "127.0.0.60/32"});
  EXPECT_TRUE(p.Contains("10.200.3.4"));
  EXPECT_TRUE(p.Contains("::ffff:10.1.2.3"));
  EXPECT_FALSE(p.Contains("11.0.0.1"));
  EXPECT_TRUE(p.Contains("172.31.255.255"));
  EXPECT_FALSE(p.Contains("172.32.0.0"));
  EXPECT_TRUE(p.Contains("2001:db8:ffff::5"));
  EXPECT_FALSE(p.Contains("2001:db9::"));
  EXPECT_TRUE(p.Contains("127.0.0.60"));
  EXPECT_FALSE(p.Contains("127.0.0.61"));
  EXPECT_FALSE(p.Contains("not an address"));
  EXPECT_FALSE(TrustedProxies().Contains("10.0.0.1"));
  EXPECT_TRUE(ProxiesOf({"10.1.2.3/8"}).Contains("10.9.9.9"));  // host bits past the prefix are ignored
}

TEST(TrustedProxies, TheClientIsTheRightmostForwardedAddressNotTrusted) {
  TrustedProxies p = ProxiesOf({"10.0.0.0/8", "127.0.0.60/32"});
  using V = std::vector<std::string>;
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{"198.51.100.1"}), "198.51.100.1");
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{"6.6.6.6, 198.51.100.1"}), "198.51.100.1");  // the left is the client's word
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{"6.6.6.6, 198.51.100.1, 10.0.0.5"}), "198.51.100.1");  // a proxy chain
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{"10.0.0.7,10.0.0.5"}), "10.0.0.7");  // all trusted: the leftmost
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{"6.6.6.6", "198.51.100.2"}), "198.51.100.2");  // two headers, in order
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{"2001:DB8::1"}), "2001:db8::1");
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{"garbage, 10.0.0.5"}), "10.0.0.5");  // the last trusted hop read
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{"198.51.100.1, garbage"}), "127.0.0.60");
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{}), "127.0.0.60");
  EXPECT_EQ(p.ClientOf("127.0.0.60", V{" , "}), "127.0.0.60");
  EXPECT_EQ(p.ClientOf("127.0.0.61", V{"198.51.100.1"}), "127.0.0.61");  // an untrusted peer's header is ignored
  EXPECT_EQ(p.ClientOf("::ffff:127.0.0.60", V{"198.51.100.1"}), "198.51.100.1");
  EXPECT_EQ(TrustedProxies().ClientOf("127.0.0.60", V{"198.51.100.1"}), "127.0.0.60");
}

}  // namespace
}  // namespace tessera

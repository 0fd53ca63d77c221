// The extender's listener over real sockets: HTTPS with a bearer token or client certificates (401
// without), probes never authenticated, the token file's rules.
#include "k8s/extender/extender_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "testing/certs.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kToken = "tok-0123456789abcdef0123456789abcdef";

// /filter's body: one 8-GPU pod, an 8-GPU and a 4-GPU H100 node.
std::string FilterBody() {
  auto node = [](const std::string& name, int gpus) {
    return json{
        {"metadata",
         {{"name", name},
          {"labels",
           {{"nvidia.com/gpu.present", "true"},
            {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
            {"nvidia.com/gpu.count", std::to_string(gpus)}}}}},
        {"status",
         {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}, {"cpu", "200"}, {"memory", "2000Gi"}}},
          {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  };
  const json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u"}}},
      {"spec", {{"containers", {{{"name", "m"}, {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}}}}}};
  return json{{"Pod", pod}, {"Nodes", {{"items", {node("n8", 8), node("n4", 4)}}}}}.dump();
}

class ExtenderServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-extsrv-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    ASSERT_TRUE(testing::MakeTestCerts(dir_, &certs_)) << "openssl CLI needed (scripts/install-deps.sh)";
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    fs::remove_all(dir_);
  }
  void Start(ExtenderServerOptions o) {
    o.port = 0;
    server_ = std::make_unique<ExtenderServer>(&extender_, std::move(o));
    ASSERT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Serve(); });
  }
  // POST /filter over HTTPS: the status (0: no answer).
  int Filter(const std::string& token, const std::string& cert = "", const std::string& key = "") {
    httplib::SSLClient c("127.0.0.1", server_->port(), cert, key);
    c.set_ca_cert_path(certs_.ca.c_str());
    c.enable_server_certificate_verification(true);
    c.set_read_timeout(3);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    auto r = c.Post("/filter", h, FilterBody(), "application/json");
    if (r && r->status == 200) {
      const json body = json::parse(r->body);
      EXPECT_EQ(body["Nodes"]["items"].size(), 1u) << r->body;
    }
    return r ? r->status : 0;
  }
  int Probe() {
    httplib::SSLClient c("127.0.0.1", server_->port());
    c.set_ca_cert_path(certs_.ca.c_str());
    c.enable_server_certificate_verification(true);
    auto r = c.Get("/healthz");
    return r ? r->status : 0;
  }

  fs::path dir_;
  testing::TestCerts certs_;
  Extender extender_{ExtenderOptions{&Catalog::Default(), "tessera.io/leaf", ""}};
  std::unique_ptr<ExtenderServer> server_;
  std::thread thread_;
};

TEST_F(ExtenderServerTest, BearerTokenOverHttps) {
  ExtenderServerOptions o;
  o.tls = {certs_.server_cert, certs_.server_key, ""};
  o.token = kToken;
  Start(o);
  EXPECT_EQ(Filter(""), 401);
  EXPECT_EQ(Filter("tok-ffffffffffffffffffffffffffffffff"), 401);
  EXPECT_EQ(Filter(kToken.substr(0, 10)), 401);
  EXPECT_EQ(Filter(kToken), 200);
  EXPECT_EQ(Probe(), 200) << "kubelet's probes carry no credentials";
}

TEST_F(ExtenderServerTest, ClientCertificatesOfTheCa) {
  ExtenderServerOptions o;
  o.tls = {certs_.server_cert, certs_.server_key, certs_.ca};
  Start(o);
  EXPECT_EQ(Filter(""), 401) << "no client certificate";
  EXPECT_EQ(Filter("", certs_.rogue_cert, certs_.rogue_key), 0)
      << "another CA's certificate fails the handshake";
  EXPECT_EQ(Filter("", certs_.client_cert, certs_.client_key), 200);
  EXPECT_EQ(Probe(), 200);
}

TEST_F(ExtenderServerTest, EitherCredentialWhenBothAreSet) {
  ExtenderServerOptions o;
  o.tls = {certs_.server_cert, certs_.server_key, certs_.ca};
  o.token = kToken;
  Start(o);
  EXPECT_EQ(Filter(kToken), 200);
  EXPECT_EQ(Filter("", certs_.client_cert, certs_.client_key), 200);
  EXPECT_EQ(Filter("wrong-token-but-long-enough"), 401);
}

TEST_F(ExtenderServerTest, MisconfigurationIsRefusedAtBind) {
  ExtenderServerOptions o;
  o.port = 0;
  o.tls.client_ca = certs_.ca;
  EXPECT_FALSE(ExtenderServer(&extender_, o).Bind().ok()) << "--client-ca without a certificate";
  o.tls = {certs_.server_cert, "", ""};
  EXPECT_FALSE(ExtenderServer(&extender_, o).Bind().ok());
  o.tls = {certs_.server_cert, (dir_ / "missing.key").string(), ""};
  const Status st = ExtenderServer(&extender_, o).Bind();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing.key"), std::string::npos) << st.message();
}

TEST_F(ExtenderServerTest, TokenFileRules) {
  const fs::path f = dir_ / "token";
  std::ofstream(f) << "  " << kToken << "  \nsecond line\n";
  auto t = ReadTokenFile(f.string());
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(*t, kToken);
  std::ofstream(f, std::ios::trunc) << "short\n";
  EXPECT_FALSE(ReadTokenFile(f.string()).ok());
  std::ofstream(f, std::ios::trunc) << "";
  EXPECT_FALSE(ReadTokenFile(f.string()).ok());
  auto missing = ReadTokenFile((dir_ / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("nope"), std::string::npos);
}

}  // namespace
}  // namespace tessera

// The fake API server (fake_apiserver.h) answers real Kubernetes clients as the API server does: kubectl
// (discovery, get, describe) and Debian's python3-kubernetes (typed lists and reads). Each test is skipped,
// saying so, only when its client is not installed.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "k8s/fake_apiserver.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using testing::FakeApiServer;

// Runs `cmd` (stderr joined to stdout); returns its exit status and output.
int RunCommand(const std::string& cmd, std::string* out) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class FakeClients : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessera-fake-clients-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    kubeconfig_ = (dir_ / "kubeconfig").string();
    api_.WriteKubeconfig(kubeconfig_, "ml");
    api_.Create("nodes", {{"metadata", {{"name", "gpu-node-0"}, {"labels", {{"nvidia.com/gpu.count", "8"}}}}},
                          {"spec", json::object()},
                          {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}, {"cpu", "64"}}},
                                      {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
    api_.Create("pods", {{"metadata", {{"name", "trainer-0"}, {"namespace", "ml"}}},
                         {"spec", {{"schedulerName", "tessera"},
                                   {"containers", {{{"name", "main"}, {"image", "trainer"}}}}}}});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  FakeApiServer api_;
  std::filesystem::path dir_;
  std::string kubeconfig_;
};

TEST_F(FakeClients, Kubectl) {
  std::string where;
  if (RunCommand("command -v kubectl", &where) != 0) GTEST_SKIP() << "kubectl is not installed: the fake is not checked against it";
  std::string out;
  ASSERT_EQ(RunCommand("kubectl --kubeconfig " + kubeconfig_ + " get nodes,pods -A", &out), 0) << out;
  EXPECT_NE(out.find("gpu-node-0"), std::string::npos) << out;
  EXPECT_NE(out.find("trainer-0"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(RunCommand("kubectl --kubeconfig " + kubeconfig_ + " get pod trainer-0 -o jsonpath='{.spec.schedulerName}'", &out), 0) << out;
  EXPECT_EQ(out, "tessera");
  out.clear();
  EXPECT_EQ(RunCommand("kubectl --kubeconfig " + kubeconfig_ + " get pod nobody", &out), 1) << out;
  EXPECT_NE(out.find("not found"), std::string::npos) << out;
}

TEST_F(FakeClients, PythonKubernetes) {
  std::string where;
  if (RunCommand("/usr/bin/python3 -c 'import kubernetes'", &where) != 0)
    GTEST_SKIP() << "Debian's python3-kubernetes is not installed (/usr/bin/python3 cannot import kubernetes): the "
                    "fake is not checked against it";
  const std::string script = (dir_ / "client.py").string();
  std::ofstream(script) << "import sys\n"
                           "from kubernetes import client, config\n"
                           "config.load_kube_config(config_file=sys.argv[1])\n"
                           "v1 = client.CoreV1Api()\n"
                           "nodes = v1.list_node()\n"
                           "pods = v1.list_pod_for_all_namespaces()\n"
                           "pod = v1.read_namespaced_pod('trainer-0', 'ml')\n"
                           "print(nodes.metadata.resource_version, [n.metadata.name for n in nodes.items],\n"
                           "      [p.metadata.name for p in pods.items], pod.spec.scheduler_name)\n";
  std::string out;
  ASSERT_EQ(RunCommand("/usr/bin/python3 " + script + " " + kubeconfig_, &out), 0) << out;
  EXPECT_NE(out.find("['gpu-node-0'] ['trainer-0'] tessera"), std::string::npos) << out;
}

}  // namespace
}  // namespace tessera

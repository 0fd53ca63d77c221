// The GPU gauges of /metrics: Tessera's own names (what Tessera accounts, not device measurements), per GPU
// and per MIG instance.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/cluster.h"
#include "service/cluster_summary.h"

namespace tessera {
namespace {

TEST(GpuMetrics, TesseraNamesPerGpuAndMigInstance) {
  constexpr const char* kCluster = R"(name: m
defaults: {gpus: 1, cpu: 64, memory_gib: 256, interconnect: nvswitch, spine: s, leaf: leaf-0, tier: reserved}
nodes:
  - {name: plain, gpu: h100-80gb}
  - {name: mig, gpu: a100-80gb, mig: {enabled: true, config: all-3g.40gb}}
)";
  auto cl = LoadClusterYaml(kCluster, "test", Catalog::Default());
  ASSERT_TRUE(cl.ok()) << cl.error();
  auto st = ClusterState::Build(*cl, Catalog::Default());
  ASSERT_TRUE(st.ok()) << st.error();
  const int p3g = Catalog::Default().kind(cl->nodes[1].kind).FindProfile("3g.40gb");
  GpuGrant whole{.gpu = 0, .milli = 1000};
  GpuGrant slice{.gpu = 1, .milli = 1000};
  slice.mig_profile = static_cast<int16_t>(p3g);
  slice.mig_start = 4;
  for (const GpuGrant& g : {whole, slice}) {
    const std::vector<TaskPlacement> tasks = {{st->gpu(g.gpu).node, {g}}};
    ASSERT_TRUE(st->CanApply(tasks, 0, 0).ok());
    st->Apply(tasks, 0, 0, false);
  }
  const std::string text = GpuMetricsText(*SummariseCluster(*st, {}));
  EXPECT_NE(text.find("# TYPE tessera_gpu_utilization_ratio gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_gpu_utilization_ratio{gpu=\"0\",device=\"nvidia0\",model_name=\"h100-80gb\","
                      "hostname=\"plain\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tessera_mig_instance_busy{gpu=\"0\",device=\"nvidia0\",model_name=\"a100-80gb\","
                      "hostname=\"mig\",mig_profile=\"3g.40gb\",mig_start=\"4\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mig_profile=\"3g.40gb\",mig_start=\"0\"} 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("DCGM"), std::string::npos) << "no hardware exporter's names: " << text;
}

}  // namespace
}  // namespace tessera

// openb CSV readers: good rows become nodes / requests; bad rows give "FILE:LINE: field 'X': ..." errors.
#include "sim/openb.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

const char kOpenbNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "openb-node-0000,64000,262144,2,P100\n"
    "openb-node-0001,96000,393216,8,G2\n"
    "openb-node-0002,32000,131072,0,\n";

const char kPodHeader[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

TEST(OpenbTest, ReadsNodes) {
  Result<Cluster> c = ParseOpenbNodes(kOpenbNodes, "nodes.csv", Catalog::Default());
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->nodes.size(), 3u);
  EXPECT_EQ(c->nodes[0].name, "openb-node-0000");
  EXPECT_EQ(c->nodes[0].kind, Catalog::Default().Find("p100-16gb"));
  EXPECT_EQ(c->nodes[0].gpu_count, 2);
  EXPECT_EQ(c->nodes[0].cpu_milli, 64000);
  EXPECT_EQ(c->nodes[0].memory_mib, 262144);
  EXPECT_EQ(c->nodes[1].kind, Catalog::Default().Find("alibaba-g2"));
  EXPECT_EQ(c->nodes[2].kind, kNone);
  EXPECT_EQ(c->TotalGpus(), 10);
}

TEST(OpenbTest, ReadsPodsInHarnessForms) {
  std::string text = std::string(kPodHeader) +
                     "p0,12000,16384,1,1000,,LS,Running,0,1,0\n"
                     "p1,6000,12288,1,460,,BE,Running,0,1,0\n"
                     "p2,4000,8192,0,0,,LS,Running,0,1,0\n"
                     "p3,88000,327680,8,1000,V100M16|V100M32,LS,Running,0,1,0\r\n";
  Result<OpenbPods> p = ParseOpenbPods(text, "pods.csv", Catalog::Default());
  ASSERT_TRUE(p.ok()) << p.error();
  ASSERT_EQ(p->requests.size(), 4u);
  EXPECT_EQ(p->names[1], "p1");
  EXPECT_EQ(p->requests[0].gpus_per_task, 1);
  EXPECT_EQ(p->requests[0].gpu_milli, 1000);
  EXPECT_EQ(p->requests[1].gpus_per_task, 0);
  EXPECT_EQ(p->requests[1].gpu_milli, 460);
  EXPECT_EQ(p->requests[1].cpu_milli, 6000);
  EXPECT_EQ(p->requests[1].host_memory_mib, 12288);
  EXPECT_EQ(p->requests[2].gpus_per_task, 0);
  EXPECT_EQ(p->requests[2].gpu_milli, 0);
  EXPECT_EQ(p->requests[3].gpus_per_task, 8);
  const Catalog& cat = Catalog::Default();
  EXPECT_EQ(p->requests[3].kind_mask, (uint64_t{1} << cat.Find("V100M16")) | (uint64_t{1} << cat.Find("V100M32")));
  EXPECT_EQ(p->requests[3].id, 3);
  // The multigpu files have only the first five columns.
  Result<OpenbPods> short_cols =
      ParseOpenbPods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,2,1000\n", "m.csv", cat);
  ASSERT_TRUE(short_cols.ok()) << short_cols.error();
  EXPECT_EQ(short_cols->requests[0].gpus_per_task, 2);
}

TEST(OpenbTest, BadPodRowsNameFileLineAndField) {
  struct Case {
    std::string row;
    std::string want;
  } cases[] = {
      {"p,1000,1024,1,abc,,LS,R,0,1,0", "pods.csv:2: field 'gpu_milli': expected an integer, got 'abc'"},
      {"p,1000,1024,1,1500,,LS,R,0,1,0", "pods.csv:2: field 'gpu_milli': 1500 is outside 0..1000"},
      {"p,1000,1024,2,500,,LS,R,0,1,0", "pods.csv:2: field 'gpu_milli': 500 below 1000 with num_gpu 2"},
      {"p,1000,1024,0,300,,LS,R,0,1,0", "pods.csv:2: field 'gpu_milli': 300 with num_gpu 0"},
      {"p,1000,1024,1,0,,LS,R,0,1,0", "pods.csv:2: field 'gpu_milli': 0 with num_gpu > 0"},
      {"p,-5,1024,1,1000,,LS,R,0,1,0", "pods.csv:2: field 'cpu_milli': -5 is outside"},
      {"p,1000,,1,1000,,LS,R,0,1,0", "pods.csv:2: field 'memory_mib': expected an integer, got ''"},
      {"p,1000,1024,x,1000,,LS,R,0,1,0", "pods.csv:2: field 'num_gpu'"},
      {"p,1000,1024,1,1000,H999,LS,R,0,1,0", "pods.csv:2: field 'gpu_spec': unknown GPU model 'H999'"},
      {"p,1000,1024,1,1000", "pods.csv:2: expected 11 fields, got 5"},
      {"p,\"1000\",1024,1,1000,,LS,R,0,1,0", "pods.csv:2: quoted CSV fields are not supported"},
      {"p,1e30,1024,1,1000,,LS,R,0,1,0", "pods.csv:2: field 'cpu_milli': expected an integer, got '1e30'"},
      {"p,1000,99999999999999999999,1,1000,,LS,R,0,1,0",
       "pods.csv:2: field 'memory_mib': 99999999999999999999 is outside 0..1099511627776"},
      {"p,1000,1024,-99999999999999999999,1000,,LS,R,0,1,0", "pods.csv:2: field 'num_gpu': -99999999999999999999 is outside"},
      {"p,1000,1024,1,nan,,LS,R,0,1,0", "pods.csv:2: field 'gpu_milli': expected an integer, got 'nan'"},
      {"p,1000,1024,65,1000,,LS,R,0,1,0", "pods.csv:2: field 'num_gpu': 65 is outside 0..64"},
      {"p,1000,1024,1,0x10,,LS,R,0,1,0", "pods.csv:2: field 'gpu_milli': expected an integer, got '0x10'"},
      {"p, 5 ,1024,1,1000,,LS,R,0,1,0", "pods.csv:2: field 'cpu_milli': expected an integer, got ' 5 '"},
      {"p,1000,1024,1,1000,,LS,R,0,1,0,extra", "pods.csv:2: expected 11 fields, got 12"},
      {"p,1000,1024,1,1000,T4|,LS,R,0,1,0", "pods.csv:2: field 'gpu_spec': unknown GPU model ''"},
  };
  for (const Case& c : cases) {
    Result<OpenbPods> p = ParseOpenbPods(std::string(kPodHeader) + c.row + "\n", "pods.csv", Catalog::Default());
    ASSERT_FALSE(p.ok()) << c.row;
    EXPECT_NE(p.error().find(c.want), std::string::npos) << "row: " << c.row << "\nerror: " << p.error();
  }
  Result<OpenbPods> missing = ParseOpenbPods("name,cpu_milli,memory_mib,num_gpu\n", "pods.csv", Catalog::Default());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("missing column 'gpu_milli'"), std::string::npos) << missing.error();
}

TEST(OpenbTest, BadNodeRowsNameFileLineAndField) {
  struct Case {
    std::string text;
    std::string want;
  } cases[] = {
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,X9\n", "nodes.csv:2: field 'model': unknown GPU model 'X9'"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,0,262144,2,T4\n", "nodes.csv:2: field 'cpu_milli': 0 is outside"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,two,T4\n", "nodes.csv:2: field 'gpu': expected an integer"},
      {"sn,cpu_milli,memory_mib,gpu,model\n,64000,262144,2,T4\n", "nodes.csv:2: field 'sn': empty node name"},
      {"sn,cpu_milli,memory_mib,gpu\nn0,1,1,1\n", "nodes.csv:1: missing column 'model'"},
      {"sn,cpu_milli,memory_mib,gpu,model\n", "nodes.csv: no nodes"},
      {"", "nodes.csv: empty file"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,1e30,262144,2,T4\n", "nodes.csv:2: field 'cpu_milli': expected an integer, got '1e30'"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,99999999999999999999,2,T4\n",
       "nodes.csv:2: field 'memory_mib': 99999999999999999999 is outside"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,nan,T4\n", "nodes.csv:2: field 'gpu': expected an integer, got 'nan'"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,,2,T4\n", "nodes.csv:2: field 'memory_mib': expected an integer, got ''"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4,extra\n", "nodes.csv:2: expected 5 fields, got 6"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2\n", "nodes.csv:2: expected 5 fields, got 4"},
      {"sn,cpu_milli,memory_mib,gpu,model\n\"n0\",64000,262144,2,T4\n", "nodes.csv:2: quoted CSV fields are not supported"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,1,T4\nn1,1,1,1,T4\r\nn0,2,2,2,T4\n",
       "nodes.csv:4: field 'sn': node 'n0' already defined on line 2"},
      {std::string("\0\xff", 2), "nodes.csv:1: missing column 'sn'"},
  };
  for (const Case& c : cases) {
    Result<Cluster> r = ParseOpenbNodes(c.text, "nodes.csv", Catalog::Default());
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().find(c.want), std::string::npos) << "text: " << c.text << "\nerror: " << r.error();
  }
}

}  // namespace
}  // namespace tessera

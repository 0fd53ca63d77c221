// Generator: mix proportions and determinism.
#include "sim/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace tessera {
namespace {

TEST(GeneratorTest, TrainingSizesAndDurations) {
  GeneratorConfig c;
  Rng rng(11);
  std::map<int, int> sizes;
  int n = 20000, short_jobs = 0;
  for (int i = 0; i < n; ++i) {
    TraceJob j = SampleTraining(c, rng);
    ++sizes[j.GpuRequests()];
    EXPECT_GE(j.compute_milli, 850);
    EXPECT_LE(j.compute_milli, 950);
    EXPECT_GE(j.duration_s, 60 * 31);  // 10^1.5 minutes
    EXPECT_LE(j.duration_s, 60 * 10000 + 1);
    EXPECT_LE(j.memory_mib, 80 * 1024);
    short_jobs += j.duration_s <= 60 * 1000;
  }
  EXPECT_NEAR(sizes[1] / double(n), 0.70, 0.015);
  EXPECT_NEAR(sizes[2] / double(n), 0.10, 0.01);
  EXPECT_NEAR(sizes[4] / double(n), 0.15, 0.01);
  EXPECT_NEAR(sizes[8] / double(n), 0.05, 0.01);
  EXPECT_NEAR(short_jobs / double(n), 0.80, 0.015);
}

TEST(GeneratorTest, InferenceMix) {
  GeneratorConfig c;
  Rng rng(5);
  int n = 20000, big = 0, light = 0, sub = 0, sub_above_4g = 0;
  std::map<std::string, int> prec;
  for (int i = 0; i < n; ++i) {
    TraceJob j = SampleInference(c, rng);
    big += j.params_billion >= 34;
    light += j.light;
    sub += j.gpus_per_task == 0;
    ++prec[j.precision];
    if (j.light) {
      EXPECT_GE(j.compute_milli, 50);
      EXPECT_LE(j.compute_milli, 200);
    } else {
      EXPECT_GE(j.compute_milli, 300);
      EXPECT_LE(j.compute_milli, 600);
    }
    if (j.gpus_per_task == 0) {
      EXPECT_LE(j.memory_mib, c.max_sub_gpu_mib);
      sub_above_4g += j.memory_mib > 40192;  // 4g.40gb's usable memory: these need a 7g.80gb slice
    } else if (j.gpus_per_task == 1) {
      EXPECT_GT(j.memory_mib, c.max_sub_gpu_mib);
    }
    EXPECT_LE(j.memory_mib, c.whole_gpu_mib);
  }
  EXPECT_GT(sub_above_4g, 0) << "single-GPU replicas up to 7g.80gb ask for a slice";
  EXPECT_GE(big / double(n), 0.20);
  EXPECT_NEAR(light / double(n), 0.5, 0.015);
  EXPECT_NEAR(prec["bf16"] / double(n), 0.40, 0.015);
  EXPECT_NEAR(prec["fp8"] / double(n), 0.35, 0.015);
  EXPECT_NEAR(prec["int4"] / double(n), 0.25, 0.015);
  EXPECT_GT(sub, 0);
}

TEST(GeneratorTest, InferenceShareOfGpuRequests) {
  for (double share : {0.3, 0.5, 0.9}) {
    GeneratorConfig c;
    c.inference_share = share;
    ArrivalConfig a;
    const auto jobs = GenerateJobs(c, a, 256, 240 * 3600, 9);
    double inf = 0, all = 0;
    for (const TraceJob& j : jobs) {
      all += j.GpuRequests();
      if (j.cls == WorkloadClass::kInference) inf += j.GpuRequests();
    }
    EXPECT_NEAR(inf / all, share, 0.03) << share;
  }
}

// A backlog holds more than any policy can run however densely it packs: overload x capacity x horizon of
// least footprints (a sub-GPU replica's memory on the largest GPU, not one GPU), so light replicas lengthen the
// stream; a larger largest GPU lengthens it further; the stream's prefix does not depend on its length.
TEST(GeneratorTest, BacklogCountsLeastFootprints) {
  GeneratorConfig c;
  c.inference_share = 0.7;
  c.light_fraction = 1.0;
  ArrivalConfig a;
  const int64_t horizon = 7 * 24 * 3600;
  const auto jobs = GenerateJobs(c, a, 64, horizon, 5, 1.6);
  double least = 0, whole = 0;
  for (const TraceJob& j : jobs) {
    const double held = static_cast<double>(std::min(j.duration_s, horizon));
    least += LeastGpuFootprint(j, 80 * 1024) * held;
    whole += j.GpuRequests() * held;
    if (j.gpus_per_task == 0) {
      EXPECT_LE(LeastGpuFootprint(j, 80 * 1024), j.tasks * 1.0);
      EXPECT_GE(LeastGpuFootprint(j, 80 * 1024), j.tasks / 64.0);
    } else {
      EXPECT_EQ(LeastGpuFootprint(j, 80 * 1024), j.GpuRequests());
    }
  }
  EXPECT_GE(least, 1.6 * 64 * horizon);
  EXPECT_GT(whole, 1.25 * least) << "light replicas count their memory, not a whole GPU";
  const auto larger = GenerateJobs(c, a, 64, horizon, 5, 1.6, 141 * 1024);
  ASSERT_GT(larger.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) ASSERT_EQ(larger[i].duration_s, jobs[i].duration_s) << i;
}

TEST(GeneratorTest, SameSeedSameJobs) {
  GeneratorConfig c;
  ArrivalConfig a;
  a.process = "poisson";
  auto x = GenerateJobs(c, a, 64, 24 * 3600, 42), y = GenerateJobs(c, a, 64, 24 * 3600, 42);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i].duration_s, y[i].duration_s);
  auto z = GenerateJobs(c, a, 64, 24 * 3600, 43);
  EXPECT_NE(x.size() == z.size() && x[0].duration_s == z[0].duration_s, true);
}

// A warm start opens on the steady state of the same stream: the jobs still running at 0 number about
// rate x E[duration] (Little's law for a stream that never waits; it looks back past a short horizon to the
// longest duration), all submitted at 0 with a positive remaining duration, and the stream after 0 is the
// one without a warm start.
TEST(GeneratorTest, WarmStartOpensOnTheSteadyState) {
  for (const int64_t horizon : {int64_t{7 * 24 * 3600}, int64_t{24 * 3600}}) {
    SCOPED_TRACE(horizon);
    GeneratorConfig c;
    ArrivalConfig a;
    a.process = "poisson";
    a.load = 1.0;
    const auto cold = GenerateJobs(c, a, 1024, horizon, 7);
    a.warm_start = true;
    const auto warm = GenerateJobs(c, a, 1024, horizon, 7);
    ASSERT_GT(warm.size(), cold.size());
    const size_t prefix = warm.size() - cold.size();
    // Rate from the stream after 0; mean duration from 20,000 draws of the same mix.
    Rng rng(11);
    const MixStats mix = ComputeMix(c);
    double mean_duration = 0;
    for (int i = 0; i < 20000; ++i)
      mean_duration += static_cast<double>(SampleJob(c, rng, rng.Uniform() < mix.p_inference).duration_s);
    mean_duration /= 20000;
    const double expected = static_cast<double>(cold.size()) / static_cast<double>(horizon) * mean_duration;
    EXPECT_NEAR(static_cast<double>(prefix), expected, 0.15 * expected);
    for (size_t i = 0; i < prefix; ++i) {
      EXPECT_EQ(warm[i].submit_s, 0);
      EXPECT_GT(warm[i].duration_s, 0);
      EXPECT_EQ(warm[i].id, static_cast<int64_t>(i));
    }
    for (size_t i = 0; i < cold.size(); ++i) {
      EXPECT_EQ(warm[prefix + i].submit_s, cold[i].submit_s);
      EXPECT_EQ(warm[prefix + i].duration_s, cold[i].duration_s);
      EXPECT_EQ(warm[prefix + i].id, static_cast<int64_t>(prefix + i));
    }
  }
}

}  // namespace
}  // namespace tessera

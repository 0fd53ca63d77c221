#include "sim/generator.h"

#include <algorithm>
#include <cmath>

#include "model/workload.h"

namespace tessera {

size_t Rng::Pick(const std::vector<double>& w) {
  double total = 0;
  for (double x : w) total += std::max(0.0, x);
  double u = Uniform() * total;
  for (size_t i = 0; i < w.size(); ++i) {
    u -= std::max(0.0, w[i]);
    if (u < 0) return i;
  }
  return w.empty() ? 0 : w.size() - 1;
}

double Rng::Exponential(double mean) { return -mean * std::log(1.0 - Uniform()); }

double DurationDist::Sample(Rng& rng) const {
  const bool is_short = rng.Uniform() < short_p;
  const double e = is_short ? rng.Uniform(short_lo, short_hi) : rng.Uniform(long_lo, long_hi);
  return 60.0 * std::pow(10.0, e);
}

double DurationDist::LongestSeconds() const { return 60.0 * std::pow(10.0, std::max(short_hi, long_hi)); }

std::vector<InferenceModel> DefaultInferenceModels() {
  // Published architectures (layers, KV heads, head dim); weights give >= 20% of replicas at 34B+.
  return {
      {"llama-3.2-1b", 1.24, 16, 8, 64, 0.15},  {"llama-3.2-3b", 3.2, 28, 8, 128, 0.15},
      {"llama-3.1-8b", 8.0, 32, 8, 128, 0.30},  {"llama-2-13b", 13.0, 40, 40, 128, 0.15},
      {"codellama-34b", 34.0, 48, 8, 128, 0.10}, {"llama-3.1-70b", 70.6, 80, 8, 128, 0.15},
  };
}

TraceJob SampleInference(const GeneratorConfig& c, Rng& rng) {
  const std::vector<InferenceModel> models = c.models.empty() ? DefaultInferenceModels() : c.models;
  std::vector<double> w;
  for (const auto& m : models) w.push_back(m.weight);
  const InferenceModel& m = models[rng.Pick(w)];
  std::vector<std::string> pnames;
  std::vector<double> pw;
  for (const auto& [name, weight] : c.precisions) {
    pnames.push_back(name);
    pw.push_back(weight);
  }
  const std::string prec = pnames.empty() ? "bf16" : pnames[rng.Pick(pw)];
  const bool light = rng.Uniform() < c.light_fraction;
  // Drawn only when asked for, so that streams without production replicas stay as they were.
  const bool production = c.production_share > 0 && rng.Uniform() < c.production_share;
  const double compute = light ? rng.Uniform(c.light_lo, c.light_hi) : rng.Uniform(c.busy_lo, c.busy_hi);
  // KV cache per token: 2 (K,V) x layers x kv_heads x head_dim x dtype bytes (5.2); fp8 models keep an
  // fp8 KV cache, the others bf16.
  const double kv_dtype = prec == "fp8" ? 1.0 : 2.0;
  const double kv_per_token = 2.0 * m.layers * m.kv_heads * m.head_dim * kv_dtype;
  const double tokens = light ? c.kv_tokens_light : c.kv_tokens_busy;
  const double kv_mib = kv_per_token * tokens / (1024.0 * 1024.0);
  MemoryDescription d;
  d.params_billion = m.params_billion;
  auto p = ParsePrecision(prec);
  d.precision = p.ok() ? *p : Precision::kBf16;
  d.overhead_pct = c.overhead_pct;
  int tp = 1;
  int64_t mib = 0;
  for (tp = 1; tp <= 8; tp *= 2) {
    d.tensor_parallel = tp;
    d.kv_cache_mib = static_cast<int64_t>(std::ceil(kv_mib / tp));
    mib = EstimateMemoryMib(d);
    if (mib <= c.whole_gpu_mib) break;
  }
  tp = std::min(tp, 8);
  TraceJob j;
  j.cls = WorkloadClass::kInference;
  j.team = "inference";
  j.tasks = 1;
  j.gpus_per_task = (tp == 1 && mib <= c.max_sub_gpu_mib) ? 0 : tp;
  j.compute_milli = static_cast<int>(std::lround(compute * 1000));
  j.memory_mib = mib;
  j.cpu_milli = c.cpu_milli_per_gpu / 2 * std::max(1, j.gpus_per_task);
  j.host_memory_mib = c.host_mib_per_gpu / 2 * std::max(1, j.gpus_per_task);
  j.gpu_kinds = c.gpu_kinds;
  j.duration_s = std::max<int64_t>(1, std::llround(c.inference_duration.Sample(rng)));
  j.params_billion = m.params_billion;
  j.precision = prec;
  j.light = light;
  j.latency_sensitive = production;
  return j;
}

TraceJob SampleTraining(const GeneratorConfig& c, Rng& rng) {
  std::vector<int> sizes;
  std::vector<double> w;
  for (const auto& [g, weight] : c.training_gpus) {
    sizes.push_back(g);
    w.push_back(weight);
  }
  const int G = sizes.empty() ? 1 : sizes[rng.Pick(w)];
  const double act_gib = rng.Uniform(4, 16);
  // Model sizes whose ZeRO-3 states (16 bytes/param over G GPUs, 5.1) plus activations fit a GPU.
  std::vector<double> ok;
  for (double pb : c.training_params) {
    MemoryDescription m;
    m.params_billion = pb;
    m.training = true;
    m.zero_stage = 3;
    m.data_parallel = G;
    m.activation_mib = static_cast<int64_t>(act_gib * 1024);
    m.overhead_pct = c.overhead_pct;
    if (EstimateMemoryMib(m) <= static_cast<int64_t>(c.max_training_gib_per_gpu * 1024)) ok.push_back(pb);
  }
  if (ok.empty()) ok.push_back(c.training_params.empty() ? 0.35 : c.training_params.front());
  const double params = ok[static_cast<size_t>(rng.Uniform() * ok.size()) % ok.size()];
  MemoryDescription d;
  d.params_billion = params;
  d.training = true;
  d.zero_stage = 3;
  d.data_parallel = G;
  d.activation_mib = static_cast<int64_t>(act_gib * 1024);
  d.overhead_pct = c.overhead_pct;
  TraceJob j;
  j.cls = WorkloadClass::kTraining;
  j.team = "training";
  const bool single = G > 1 && rng.Uniform() < c.single_gpu_pods;
  if (single) {
    j.tasks = G;
    j.gpus_per_task = 1;
  } else {
    const int per_pod = std::min(G, std::max(1, c.gpus_per_pod));
    j.tasks = (G + per_pod - 1) / per_pod;
    j.gpus_per_task = per_pod;
  }
  j.compute_milli = static_cast<int>(std::lround(rng.Uniform(c.train_lo, c.train_hi) * 1000));
  j.memory_mib = EstimateMemoryMib(d);
  j.cpu_milli = c.cpu_milli_per_gpu * j.gpus_per_task;
  j.host_memory_mib = c.host_mib_per_gpu * j.gpus_per_task;
  j.gpu_kinds = c.gpu_kinds;
  j.duration_s = std::max<int64_t>(1, std::llround(c.training_duration.Sample(rng)));
  j.grad_bytes = 2.0 * params * 1e9;  // bf16 gradients
  j.step_compute_s = 6.0 * params * 1e9 * c.tokens_per_gpu_step / (c.step_tflops * 1e12 * c.mfu);
  j.checkpointable = c.checkpointable;
  j.params_billion = params;
  j.precision = "bf16";
  return j;
}

TraceJob SampleJob(const GeneratorConfig& c, Rng& rng, bool inference) {
  return inference ? SampleInference(c, rng) : SampleTraining(c, rng);
}

MixStats ComputeMix(const GeneratorConfig& c) {
  Rng rng(0x7E55E7A);
  constexpr int kN = 20000;
  double gi = 0, gt = 0, si = 0, st = 0;
  for (int i = 0; i < kN; ++i) {
    TraceJob a = SampleInference(c, rng);
    gi += a.GpuRequests();
    si += a.GpuRequests() * static_cast<double>(a.duration_s);
    TraceJob b = SampleTraining(c, rng);
    gt += b.GpuRequests();
    st += b.GpuRequests() * static_cast<double>(b.duration_s);
  }
  MixStats m;
  m.mean_inference_gpus = gi / kN;
  m.mean_training_gpus = gt / kN;
  const double s = std::clamp(c.inference_share, 0.0, 1.0);
  const double denom = s * m.mean_training_gpus + (1 - s) * m.mean_inference_gpus;
  m.p_inference = denom > 0 ? s * m.mean_training_gpus / denom : 0;
  m.mean_gpu_seconds = m.p_inference * si / kN + (1 - m.p_inference) * st / kN;
  return m;
}

namespace {

// The jobs a poisson stream of `mean_gap` started before 0 that still run at 0, each submitted at 0 with
// what is left of its duration. It looks back as far as the longest duration either class can draw (at
// least the horizon, at most ten horizons), so no job that could still run is missed in any file that keeps
// durations within ten horizons. Its own random stream (from `seed`), so the stream after 0 is the same with
// or without it.
std::vector<TraceJob> RunningAtStart(const GeneratorConfig& c, const MixStats& mix, double mean_gap,
                                     int64_t horizon_s, uint64_t seed) {
  const double horizon = static_cast<double>(horizon_s);
  const double back =
      std::clamp(std::max(c.inference_duration.LongestSeconds(), c.training_duration.LongestSeconds()),
                 horizon, 10 * horizon);
  Rng rng(seed ^ 0x5EED57A27ULL);
  std::vector<TraceJob> jobs;
  for (double t = -back + rng.Exponential(mean_gap); t < 0; t += rng.Exponential(mean_gap)) {
    TraceJob j = SampleJob(c, rng, rng.Uniform() < mix.p_inference);
    const int64_t left = j.duration_s - static_cast<int64_t>(std::ceil(-t));
    if (left <= 0) continue;
    j.duration_s = left;
    j.id = static_cast<int64_t>(jobs.size());
    j.submit_s = 0;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

}  // namespace

double LeastGpuFootprint(const TraceJob& j, int64_t largest_gpu_memory_mib) {
  if (j.gpus_per_task > 0) return j.GpuRequests();
  const double memory = static_cast<double>(j.memory_mib) / static_cast<double>(std::max<int64_t>(1, largest_gpu_memory_mib));
  return j.tasks * std::clamp(memory, 1.0 / 64, 1.0);
}

std::vector<TraceJob> GenerateJobs(const GeneratorConfig& c, const ArrivalConfig& a, int capacity_gpus,
                                   int64_t horizon_s, uint64_t seed, double backlog_factor,
                                   int64_t largest_gpu_memory_mib) {
  const MixStats mix = ComputeMix(c);
  Rng rng(seed);
  std::vector<TraceJob> jobs;
  const bool poisson = a.process == "poisson";
  const double mean_gap =
      poisson ? mix.mean_gpu_seconds / std::max(1e-9, a.load * capacity_gpus) : 0.0;
  const double target = backlog_factor * capacity_gpus * static_cast<double>(horizon_s);
  if (poisson && a.warm_start) jobs = RunningAtStart(c, mix, mean_gap, horizon_s, seed);
  double t = 0, gpu_seconds = 0;
  while (true) {
    if (poisson) {
      t += rng.Exponential(mean_gap);
      if (t > static_cast<double>(horizon_s)) break;
    } else if (gpu_seconds >= target) {
      break;
    }
    const bool inference = rng.Uniform() < mix.p_inference;
    TraceJob j = SampleJob(c, rng, inference);
    j.id = static_cast<int64_t>(jobs.size());
    j.submit_s = poisson ? static_cast<int64_t>(t) : 0;
    // Capped at the horizon: a week-long job holds GPUs for at most the horizon.
    gpu_seconds += LeastGpuFootprint(j, largest_gpu_memory_mib) * std::min(static_cast<double>(j.duration_s), static_cast<double>(horizon_s));
    jobs.push_back(std::move(j));
  }
  return jobs;
}

}  // namespace tessera

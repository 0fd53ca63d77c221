#pragma once
// Seeded workload generator for the scenarios (docs/simulator.md "Generator"): inference replicas with
// memory from hardware-facts.md section 5 (model size, precision, KV-cache budget, overhead) and compute
// demand (light / busy), and training gangs in the Philly-like size mix with log-uniform durations.
// Deterministic: the same config and seed give the same jobs on every platform (own uniform draws from
// std::mt19937_64 bits, no std distributions).

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "sim/trace.h"

namespace tessera {

// Uniform doubles in [0,1) from the raw 64-bit stream (portable, unlike std::uniform_real_distribution).
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Index drawn from (unnormalised) weights.
  size_t Pick(const std::vector<double>& weights);
  double Exponential(double mean);

 private:
  std::mt19937_64 gen_;
};

struct InferenceModel {
  std::string name;
  double params_billion = 7;
  int layers = 32;
  int kv_heads = 8;
  int head_dim = 128;
  double weight = 1;  // share of replicas
};

// Duration: 10^U(short_lo, short_hi) minutes with probability short_p, else 10^U(long_lo, long_hi).
struct DurationDist {
  double short_p = 0.8;
  double short_lo = 1.5, short_hi = 3.0;
  double long_lo = 3.0, long_hi = 4.0;
  double Sample(Rng& rng) const;  // seconds
  double LongestSeconds() const;  // the longest duration Sample can draw
};

struct GeneratorConfig {
  double inference_share = 0.5;       // of GPU requests (a sub-GPU replica counts 1, a TP=k replica k)
  double light_fraction = 0.5;        // share of light replicas (traffic light=1, mixed=0.5, busy=0)
  double production_share = 0.0;      // share of replicas that are production (latency-sensitive) inference
  // Backlog arrivals: the stream holds overload x capacity x horizon GPU-seconds (more than any policy runs).
  double overload = 1.6;
  double light_lo = 0.05, light_hi = 0.2;
  double busy_lo = 0.3, busy_hi = 0.6;
  std::vector<InferenceModel> models;                 // empty = defaults (docs/simulator.md)
  std::map<std::string, double> precisions = {{"bf16", 0.4}, {"fp8", 0.35}, {"int4", 0.25}};
  double kv_tokens_light = 16384;     // tokens of KV budget per light replica (e.g. 8 sequences x 2k)
  double kv_tokens_busy = 65536;      // busy replica (e.g. 32 sequences x 2k)
  int overhead_pct = 15;              // CUDA context, allocator, runtime buffers (5.3: 10-20%)
  int64_t whole_gpu_mib = 80 * 1024 - 1024;  // above this per GPU, tensor parallelism doubles
  // A single-GPU replica up to this memory asks for a slice sized by its memory (up to 7g.80gb, whose
  // usable memory is 80,384 MiB on the A100 80GB, the smaller of the two 80 GB kinds); above it, a whole GPU.
  // A replica of 40-80 GB in a 7g instance leaves the rest of the instance to smaller sharers.
  int64_t max_sub_gpu_mib = 80384;
  DurationDist inference_duration;
  // Training.
  std::map<int, double> training_gpus = {{1, 0.7}, {2, 0.1}, {4, 0.15}, {8, 0.05}};
  DurationDist training_duration;
  double train_lo = 0.85, train_hi = 0.95;           // compute use per GPU
  int gpus_per_pod = 8;                               // a job of G GPUs = ceil(G/8) pods of min(G, 8)
  double single_gpu_pods = 0.0;                       // probability a multi-GPU job is G pods of 1 GPU
  std::vector<double> training_params = {0.35, 1.3, 2.7, 7, 13, 34, 70};
  double tokens_per_gpu_step = 16384;                 // per GPU per step (e.g. micro-batch 4 x 4096)
  double mfu = 0.4;                                    // model FLOPs utilisation
  double step_tflops = 989;                            // H100 SXM dense bf16
  double max_training_gib_per_gpu = 70;               // ZeRO-3 states + activations must fit
  bool checkpointable = true;
  // Requests per task (so kube-scheduler scoring sees realistic pods).
  int64_t cpu_milli_per_gpu = 8000;
  int64_t host_mib_per_gpu = 64 * 1024;
  std::vector<std::string> gpu_kinds;                 // allowed kinds for every job; empty = any
};

// Defaults for `models` (used when the config lists none).
std::vector<InferenceModel> DefaultInferenceModels();

// One job drawn from the config (ids and submit times are the caller's).
TraceJob SampleJob(const GeneratorConfig& c, Rng& rng, bool inference);
TraceJob SampleInference(const GeneratorConfig& c, Rng& rng);
TraceJob SampleTraining(const GeneratorConfig& c, Rng& rng);

struct MixStats {
  double p_inference = 0.5;         // probability a job is an inference replica
  double mean_gpu_seconds = 0;      // per job, whole-GPU accounting
  double mean_inference_gpus = 1, mean_training_gpus = 1;
};
// Probability of an inference job that gives `inference_share` of GPU requests, estimated with a fixed
// internal seed (so every run seed uses the same mix).
MixStats ComputeMix(const GeneratorConfig& c);

// Arrival process. backlog: jobs become visible in stream order whenever fewer than `depth` wait
// (submit_s of generated jobs is 0; the simulator stamps the release time). poisson: open arrivals with
// the rate that offers `load` x cluster GPU capacity in whole-GPU terms.
// warm_start (poisson only): the stream opens on a cluster already in its steady state instead of an empty
// one: the jobs of the same arrival process before time 0 (as far back as the longest duration it draws,
// at least `horizon_s`, at most ten times it) that would still run at 0 (a stationary infinite-server
// population), submitted at 0 with their remaining duration.
struct ArrivalConfig {
  std::string process = "backlog";  // backlog | poisson
  int depth = 64;
  double load = 0.9;
  bool warm_start = false;
};

// The least share of GPUs any policy can hold for `j`: its GPUs if whole; for a sub-GPU job its memory on
// the largest GPU (`largest_gpu_memory_mib`), at least 1/64 of a GPU per task. (Compute is no bound: time-
// slicing runs sharers past a GPU's compute; memory is, or the replica is killed.)
double LeastGpuFootprint(const TraceJob& j, int64_t largest_gpu_memory_mib);

// Generates jobs for a horizon of `horizon_s` on `capacity_gpus` GPUs: poisson until the horizon; backlog
// until the stream holds `backlog_factor` x capacity x horizon GPU-seconds of least footprints, each job's
// duration capped at the horizon: more than any policy can run, however densely it packs (a run that still
// runs dry says so: RunResult::backlog_dry_s).
std::vector<TraceJob> GenerateJobs(const GeneratorConfig& c, const ArrivalConfig& a, int capacity_gpus,
                                   int64_t horizon_s, uint64_t seed, double backlog_factor = 1.6,
                                   int64_t largest_gpu_memory_mib = 80 * 1024);

}  // namespace tessera

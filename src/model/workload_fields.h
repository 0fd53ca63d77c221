#pragma once
// The one definition of a workload entry's fields (examples/workloads/*.yaml, the API's job body): which
// keys, their ranges, defaults and how they combine. Written once against a field reader so that YAML files
// (base/yaml_reader.h: FieldReader) and JSON request bodies (service/json_fields.h) read the same schema
// with the same messages, without converting one document type into the other.
//
// A reader R provides FieldReader's interface: Has, String, Int (int and int64_t), Double, Bool,
// StringList, Allow, Fail, Finish, ok, and Sub(key), the reader of the map under `key` (marking it read). The
// first error wins; Finish rejects keys nothing read.

#include <cmath>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/workload.h"

namespace tessera {

inline constexpr int64_t kMaxWorkloadSeconds = int64_t{1} << 40;

// A string field naming a value of some type (a precision, a workload class): `parse` turns the text into
// the value or the error that becomes the field's message. `*out` keeps its default when the key is absent.
template <class R, class T, class Parse>
void ReadParsed(R& r, std::string_view key, Parse parse, T* out) {
  std::string text;
  r.String(key, &text, false);
  if (!r.ok() || !r.Has(key)) return;
  auto v = parse(text);
  if (v.ok())
    *out = *v;
  else
    r.Fail(key, v.error());
}

// The optional `memory:` description of a workload; `training` defaults to the workload's class.
template <class R>
Status ReadMemoryFields(R& m, bool training, MemoryDescription* out) {
  MemoryDescription d;
  d.training = training;
  m.Double("params_billion", &d.params_billion, true, 1e-6, 1e6);
  ReadParsed(m, "precision", ParsePrecision, &d.precision);  // default bf16
  m.Bool("training", &d.training);
  m.Int("optimizer_bytes_per_param", &d.optimizer_bytes_per_param, false, 1, 64);
  m.Int("zero_stage", &d.zero_stage, false, 0, 3);
  m.Int("data_parallel", &d.data_parallel, false, 1, 1 << 20);
  m.Int("tensor_parallel", &d.tensor_parallel, false, 1, 4096);
  double kv = 0, act = 0;
  m.Double("kv_cache_gib", &kv, false, 0, 1e6);
  m.Double("activation_gib", &act, false, 0, 1e6);
  d.kv_cache_mib = static_cast<int64_t>(std::ceil(kv * 1024));
  d.activation_mib = static_cast<int64_t>(std::ceil(act * 1024));
  m.Int("overhead_pct", &d.overhead_pct, false, 0, 200);
  if (Status st = m.Finish(); !st.ok()) return st;
  *out = d;
  return Status::Ok();
}

// Requests: replicas or workers, GPUs per worker, and a sub-GPU size (gpu_fraction or gpu_milli).
template <class R>
void ReadRequestFields(R& r, Workload* w) {
  r.Int("replicas", &w->replicas, false, 1, 100000);
  r.Int("workers", &w->workers, false, 1, 100000);
  r.Int("gpus_per_worker", &w->gpus_per_worker, false, 0, 64);
  double frac = -1;
  r.Double("gpu_fraction", &frac, false, 1e-3, 1);
  if (frac > 0) {
    w->gpu_milli = static_cast<int>(std::lround(frac * 1000));
    if (w->gpu_milli < 1000) w->gpus_per_worker = 0;
  }
  if (r.Has("gpu_milli")) {
    r.Int("gpu_milli", &w->gpu_milli, false, 1, 1000);
    if (w->gpu_milli < 1000) w->gpus_per_worker = 0;
  }
}

// GPU memory: memory_gib or memory_mib, else estimated from a `memory:` description.
template <class R>
Status ReadMemoryNeed(R& r, Workload* w) {
  double gib = -1;
  r.Double("memory_gib", &gib, false, 0, 1e6);
  if (gib >= 0) w->memory_mib = static_cast<int64_t>(std::ceil(gib * 1024));
  r.Int("memory_mib", &w->memory_mib, false, 0, int64_t{1} << 30);
  r.Allow("memory");  // known even when absent (unknown-field messages list it)
  if (!r.ok() || !r.Has("memory")) return Status::Ok();
  R m = r.Sub("memory");
  MemoryDescription d;
  if (Status st = ReadMemoryFields(m, w->cls == WorkloadClass::kTraining, &d); !st.ok()) return st;
  w->memory = d;
  if (!r.Has("memory_mib") && !r.Has("memory_gib")) w->memory_mib = EstimateMemoryMib(d);
  return Status::Ok();
}

// One workload entry (a map).
template <class R>
Result<Workload> ReadWorkloadFields(R& r) {
  Workload w;
  r.String("name", &w.name, true);
  if (r.ok() && w.name.empty()) r.Fail("name", "must not be empty");
  ReadParsed(r, "class", ParseWorkloadClass, &w.cls);  // default inference
  r.String("team", &w.team, false);
  r.String("project", &w.project, false);
  r.String("priority_class", &w.priority_class, false);
  ReadRequestFields(r, &w);
  if (Status st = ReadMemoryNeed(r, &w); !st.ok()) return st;
  double cpu = 0, host_gib = 0;
  r.Double("cpu", &cpu, false, 0, 1e6);
  r.Double("host_memory_gib", &host_gib, false, 0, 1e8);
  w.cpu_milli = static_cast<int64_t>(std::lround(cpu * 1000));
  w.host_memory_mib = static_cast<int64_t>(std::ceil(host_gib * 1024));
  r.StringList("gpu_kinds", &w.gpu_kinds, false);
  r.Int("checkpoint_interval_s", &w.checkpoint_interval_s, false, 0, kMaxWorkloadSeconds);
  r.Int("duration_s", &w.duration_s, false, 0, kMaxWorkloadSeconds);
  r.Int("time_limit_s", &w.time_limit_s, false, 0, kMaxWorkloadSeconds);
  r.Bool("latency_sensitive", &w.latency_sensitive);
  r.Bool("checkpointable", &w.checkpointable);
  if (r.ok() && w.gpus_per_worker == 0 && w.workers > 1)
    r.Fail("workers", "a gang (workers > 1) needs whole GPUs: MIG slices and shares cannot join NCCL");
  if (Status st = r.Finish(); !st.ok()) return st;
  return w;
}

}  // namespace tessera

#include "sim/openb.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>

#include "base/file.h"

namespace tessera {

namespace {

// One CSV line split on commas. The openb files hold plain values (no quoting); a quote is rejected.
struct Row {
  int line = 0;
  std::vector<std::string_view> fields;
};

// Splits `text` into header + rows; errors name the line.
Status SplitCsv(std::string_view text, std::string_view source, std::vector<std::string_view>* header,
                std::vector<Row>* rows) {
  LineReader lines(text);
  std::string_view line;
  while (lines.Next(&line)) {
    const int line_no = lines.line_no();
    if (line.empty()) continue;
    if (line.find('"') != std::string_view::npos)
      return Status::Error(fmt::format("{}:{}: quoted CSV fields are not supported", source, line_no));
    Row r;
    r.line = line_no;
    size_t p = 0;
    for (;;) {
      size_t c = line.find(',', p);
      r.fields.push_back(line.substr(p, c == std::string_view::npos ? std::string_view::npos : c - p));
      if (c == std::string_view::npos) break;
      p = c + 1;
    }
    if (header->empty()) *header = r.fields;
    else rows->push_back(std::move(r));
  }
  if (header->empty()) return Status::Error(fmt::format("{}: empty file (no header line)", source));
  return Status::Ok();
}

class Columns {
 public:
  Columns(const std::vector<std::string_view>& header) {
    for (size_t i = 0; i < header.size(); ++i) index_[std::string(header[i])] = i;
  }
  Status Require(std::string_view source, std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (!index_.count(n)) return Status::Error(fmt::format("{}:1: missing column '{}'", source, n));
    return Status::Ok();
  }
  std::optional<size_t> Find(const char* name) const {
    auto it = index_.find(name);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::string, size_t, std::less<>> index_;
};

struct RowReader {
  std::string_view source;
  const Row& row;
  const Columns& cols;
  size_t width;

  Status Width() const {
    if (row.fields.size() != width)
      return Status::Error(fmt::format("{}:{}: expected {} fields, got {}", source, row.line, width, row.fields.size()));
    return Status::Ok();
  }
  std::string_view Text(const char* name) const {
    auto i = cols.Find(name);
    return i ? row.fields[*i] : std::string_view();
  }
  Status Int(const char* name, int64_t lo, int64_t hi, int64_t* out) const {
    std::string_view v = Text(name);
    int64_t x = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec == std::errc::result_out_of_range)
      return Status::Error(fmt::format("{}:{}: field '{}': {} is outside {}..{}", source, row.line, name, v, lo, hi));
    if (v.empty() || ec != std::errc() || p != v.data() + v.size())
      return Status::Error(fmt::format("{}:{}: field '{}': expected an integer, got '{}'", source, row.line, name, v));
    if (x < lo || x > hi)
      return Status::Error(
          fmt::format("{}:{}: field '{}': {} is outside {}..{}", source, row.line, name, x, lo, hi));
    *out = x;
    return Status::Ok();
  }
  Status Error(const char* field, const std::string& what) const {
    return Status::Error(fmt::format("{}:{}: field '{}': {}", source, row.line, field, what));
  }
};

constexpr int64_t kMaxMilliCpu = int64_t{1} << 40;
constexpr int64_t kMaxMib = int64_t{1} << 40;
constexpr int64_t kMaxGpusPerNode = 64;

}  // namespace

Result<Cluster> ParseOpenbNodes(std::string_view text, std::string_view source, const Catalog& catalog) {
  std::vector<std::string_view> header;
  std::vector<Row> rows;
  if (Status st = SplitCsv(text, source, &header, &rows); !st.ok()) return st;
  Columns cols(header);
  if (Status st = cols.Require(source, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}); !st.ok()) return st;
  Cluster c;
  c.name = std::string(source);
  c.leaf_names = {"leaf-0"};
  c.spine_names = {"spine-0"};
  std::map<std::string, int, std::less<>> line_of_name;
  for (const Row& row : rows) {
    RowReader rr{source, row, cols, header.size()};
    if (Status st = rr.Width(); !st.ok()) return st;
    Node n;
    n.name = std::string(rr.Text("sn"));
    if (n.name.empty()) return rr.Error("sn", "empty node name");
    if (auto [it, fresh] = line_of_name.emplace(n.name, row.line); !fresh)
      return rr.Error("sn", fmt::format("node '{}' already defined on line {}", n.name, it->second));
    int64_t gpus = 0;
    if (Status st = rr.Int("cpu_milli", 1, kMaxMilliCpu, &n.cpu_milli); !st.ok()) return st;
    if (Status st = rr.Int("memory_mib", 0, kMaxMib, &n.memory_mib); !st.ok()) return st;
    if (Status st = rr.Int("gpu", 0, kMaxGpusPerNode, &gpus); !st.ok()) return st;
    n.gpu_count = static_cast<int>(gpus);
    std::string_view model = rr.Text("model");
    if (n.gpu_count > 0) {
      n.kind = catalog.Find(model);
      if (n.kind == kNone) return rr.Error("model", fmt::format("unknown GPU model '{}'", model));
    }
    n.interconnect = Interconnect::kPcie;
    n.pool = "reserved";
    c.nodes.push_back(std::move(n));
  }
  if (c.nodes.empty()) return Status::Error(fmt::format("{}: no nodes", source));
  return c;
}

Result<OpenbPods> ParseOpenbPods(std::string_view text, std::string_view source, const Catalog& catalog) {
  std::vector<std::string_view> header;
  std::vector<Row> rows;
  if (Status st = SplitCsv(text, source, &header, &rows); !st.ok()) return st;
  Columns cols(header);
  if (Status st = cols.Require(source, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}); !st.ok())
    return st;
  OpenbPods out;
  out.requests.reserve(rows.size());
  for (const Row& row : rows) {
    RowReader rr{source, row, cols, header.size()};
    if (Status st = rr.Width(); !st.ok()) return st;
    Request r;
    r.id = static_cast<JobId>(out.requests.size());
    int64_t num_gpu = 0, gpu_milli = 0;
    if (Status st = rr.Int("cpu_milli", 0, kMaxMilliCpu, &r.cpu_milli); !st.ok()) return st;
    if (Status st = rr.Int("memory_mib", 0, kMaxMib, &r.host_memory_mib); !st.ok()) return st;
    if (Status st = rr.Int("num_gpu", 0, kMaxGpusPerNode, &num_gpu); !st.ok()) return st;
    if (Status st = rr.Int("gpu_milli", 0, kMilliPerGpu, &gpu_milli); !st.ok()) return st;
    if (num_gpu == 0 && gpu_milli != 0) return rr.Error("gpu_milli", fmt::format("{} with num_gpu 0 (must be 0)", gpu_milli));
    if (num_gpu > 0 && gpu_milli == 0) return rr.Error("gpu_milli", "0 with num_gpu > 0 (must be 1..1000)");
    if (num_gpu > 1 && gpu_milli < kMilliPerGpu)
      return rr.Error("gpu_milli", fmt::format("{} below 1000 with num_gpu {} (shares need num_gpu 1)", gpu_milli, num_gpu));
    r.allow_mig = false;
    r.allow_share = true;
    if (num_gpu == 0) {
      r.gpus_per_task = 0;
      r.gpu_milli = 0;
    } else if (gpu_milli < kMilliPerGpu) {
      r.gpus_per_task = 0;
      r.gpu_milli = static_cast<int>(gpu_milli);
    } else {
      r.gpus_per_task = static_cast<int>(num_gpu);
      r.gpu_milli = kMilliPerGpu;
    }
    std::string_view spec = rr.Text("gpu_spec");
    // "A|B": every entry a known model (an empty entry, as in "A|", is an error).
    for (bool more = !spec.empty(); more;) {
      const size_t bar = spec.find('|');
      std::string_view model = spec.substr(0, bar);
      KindId k = catalog.Find(model);
      if (k == kNone || k >= 64) return rr.Error("gpu_spec", fmt::format("unknown GPU model '{}'", model));
      r.kind_mask |= uint64_t{1} << k;
      more = bar != std::string_view::npos;
      if (more) spec.remove_prefix(bar + 1);
    }
    std::string_view qos = rr.Text("qos");
    r.cls = qos == "BE" ? WorkloadClass::kBatchInference : WorkloadClass::kInference;
    out.names.emplace_back(rr.Text("name"));
    out.requests.push_back(r);
  }
  return out;
}

}  // namespace tessera

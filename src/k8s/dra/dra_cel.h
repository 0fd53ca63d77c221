#pragma once
// The subset of CEL that DRA device selectors use for GPUs (k8s.io/dynamic-resource-allocation/cel), as a
// small evaluator (no CEL library is packaged by Debian). Understood: `device.driver`,
// `device.attributes["domain"].name`, `device.capacity["domain"].name` (unqualified attribute and capacity
// names belong to the device's driver's domain), `device.allowMultipleAllocations`; int, string and bool
// literals and lists of them; == != < <= > >= && || ! `in` (lists, and map keys), parentheses;
// `quantity("40Gi")` and `semver("1.2.3")` with .compareTo/.isGreaterThan/.isLessThan; string
// .startsWith/.endsWith/.contains/.size/.lowerAscii/.upperAscii; has(x.field).
// Semantics follow CEL: && and || absorb an error when the other side decides (false && error is false);
// a missing attribute is a runtime error (kError), which fails the device for that claim. Anything outside
// the subset is kUnsupported with a message naming the expression; never a crash, never a silent match.

#include <memory>
#include <string>

#include "k8s/dra/dra_objects.h"

namespace tessera {

enum class CelVerdict { kMatch, kNoMatch, kError, kUnsupported };

struct CelOutcome {
  CelVerdict verdict = CelVerdict::kNoMatch;
  std::string message;  // for kError and kUnsupported: what went wrong, naming the expression
};

struct CelNode;

class CelSelector {
 public:
  // Parses once; an expression outside the subset gives a selector whose every evaluation is kUnsupported.
  static CelSelector Compile(const std::string& expression);

  bool supported() const { return root_ != nullptr; }
  const std::string& unsupported_reason() const { return unsupported_; }
  const std::string& expression() const { return expression_; }

  // Evaluates against a device published by `driver`.
  CelOutcome Evaluate(const DraDevice& device, const std::string& driver) const;

 private:
  std::string expression_, unsupported_;
  std::shared_ptr<const CelNode> root_;
};

}  // namespace tessera
